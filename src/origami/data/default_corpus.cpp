// The built-in training text: original English prose written for Origami (free to use),
// varied in form (stories, a dialogue, plain descriptions, a list, a letter) but with
// recurring words and patterns, so that a small byte-level model's loss falls clearly in a
// few hundred steps: first it learns letter frequencies, then common words, then phrases.
#include "origami/data/dataset.h"

namespace origami::data {

namespace {

constexpr std::string_view kCorpus = R"(The Miller and the River

There was once a miller who lived beside a wide river. Every morning he opened the gate of
the mill, and the water turned the great wheel, and the wheel turned the stone, and the stone
ground the grain into flour. The miller was proud of his wheel. He painted it red every spring
and oiled it every autumn, and he said to anyone who would listen that it was the finest wheel
in the valley.

One summer the rain did not come. The river grew thin and slow, and the wheel turned so
gently that the stone hardly moved. The miller walked up the river to find out why. He walked
past the meadow and past the wood and past the old stone bridge, and at last he came to a
place where a family of beavers had built a dam across the water.

"Your dam has stopped my river," said the miller.

"Your river?" said the oldest beaver. "The river was here before your mill and before my dam.
It belongs to the rain and to the hills. We only borrow it, as you do."

The miller thought about this for a long time. Then he went home, and instead of painting his
wheel he cut a narrow channel beside it, so that a little water could always pass, even in a
dry year. The next spring the rain came back, the river grew wide again, and the miller and the
beavers both had as much water as they needed.

The Lighthouse Keeper

The lighthouse stood at the end of a long grey rock, and the keeper climbed its stairs every
evening at sunset. There were one hundred and twelve stairs. She counted them each night, not
because she might forget the number, but because counting kept her steady when the wind was
loud. At the top she trimmed the wick, cleaned the glass, and lit the lamp. Then the beam went
out across the water, turning slowly, once every ten seconds, all night long.

Ships far away saw the light and knew where the rocks were. They did not know the keeper's name.
They did not need to. The light was the message, and the message was always the same: here is
danger, here is the way around it, keep going.

A Conversation About Numbers

"How many stars are there?" asked the child.

"More than anyone has counted," said the teacher.

"Then how do we know there are more?"

"Because every time we build a better telescope, we see more of them. When a number keeps
growing each time you look more carefully, you learn something about it even before you know
its size."

"Is that true of other things?"

"Of many things. The more carefully you read a book, the more you find in it. The more
carefully you listen to a friend, the more you understand. Care is a kind of telescope."

How Bread Is Made

To make a simple loaf of bread, you need flour, water, salt and yeast. Mix the flour and the
salt in a large bowl. Warm the water until it feels neither hot nor cold on your wrist, and stir
the yeast into it. Pour the water into the flour and mix until there is no dry flour left.
Knead the dough on a table for ten minutes, folding it and pressing it away from you, until it
is smooth and springs back when you touch it. Put it back in the bowl, cover it with a cloth,
and leave it in a warm place for an hour, until it has doubled in size. Shape it into a loaf,
let it rise for another half hour, and bake it in a hot oven for about forty minutes. The bread
is done when it sounds hollow when you tap the bottom.

Things That Are Found in a Garden

A garden has soil, and the soil has worms, and the worms make the soil rich. A garden has
bees, and the bees carry pollen from flower to flower. A garden has rain, which the roots drink,
and sun, which the leaves drink. A garden has weeds, which grow faster than anything else, and a
gardener, who pulls them out. A garden has patience, because nothing in it can be hurried. A
seed planted in the spring becomes a flower in the summer, a fruit in the autumn, and a seed
again in the winter.

The Clockmaker's Letter

Dear Thomas,

Thank you for the clock you sent me to repair. I have taken it apart and cleaned every wheel.
The trouble was a small spring that had lost its strength after many years of work. I have
replaced it with a new one, and the clock now keeps good time. It gains perhaps one second in a
day, which is better than most clocks I know, and far better than most people I know.

I have also oiled the pivots and straightened one of the hands, which had been bent, I think,
by someone trying to set the time with a heavy finger. Please set it gently. A clock is patient
with many things, but not with force.

I will send it back to you on Monday, wrapped in wool and packed in a wooden box.

With best wishes,
Anna

The Fox Who Counted Geese

A hungry fox lay in the tall grass beside a pond and watched the geese. There were seven geese.
He counted them once, and there were seven. He counted them twice, and there were seven. He
decided to wait until one of them wandered away from the others. He waited all morning, and
the geese stayed together. He waited all afternoon, and the geese stayed together. When the
sun went down the geese flew away, all seven of them, in a long line across the sky. The fox
went home hungry, but he had learned that seven geese who stay together are safer than one
goose alone.

Rules for a Long Walk

Start early, while the air is cool. Carry water, and drink before you are thirsty. Walk at a
pace at which you can still talk. Rest for five minutes every hour, even when you feel strong.
Look back now and then, so that you will know the path when you return. Do not cross a river
where you cannot see the bottom. Eat something small at midday. Stop before you are tired, not
after. Tell someone where you are going and when you will come back, and then come back when you
said you would.

The Two Builders

Two builders were each asked to build a wall. The first builder worked quickly. He laid the
stones one on top of the other and finished in a single day, and everyone praised him for his
speed. The second builder worked slowly. She dug a deep trench first, and filled it with gravel,
and laid the largest stones at the bottom, and she took a whole week. That winter there was a
great storm. The first wall fell down in the night. The second wall is still standing, and
children sit on it in the summer and eat cherries and throw the stones over the top.

The Morning Market

On market mornings the square fills before the sun is up. The baker arrives first, with bread
still warm in baskets. Then come the farmers with eggs and cheese, apples and onions, carrots
with the soil still on them. The fishmonger sets out his ice and lays the fish in neat rows. A
woman sells honey in small jars, and a man sells knives and sharpens old ones while you wait.
By nine o'clock the square is loud with voices, and by noon it is empty again, except for the
pigeons, who know that the best time to visit a market is just after everyone has gone home.
)";

}  // namespace

std::string_view default_corpus_text() { return kCorpus; }

}  // namespace origami::data
