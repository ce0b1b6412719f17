#!/usr/bin/env python3
"""Writes the tokenizer test corpus, deterministically (a fixed seed, no input): documents of
English prose, code, CJK, emoji, long whitespace runs, digits, mixed scripts (with decomposed
accents and Hangul jamo for NFC), random code points of every assigned category, added-token
texts, and invalid UTF-8 bytes; over 1 MB in all.

  python3 make_corpus.py OUT.bin

OUT.bin: for each document, its length (uint32, little-endian) then its bytes. Code points come
from Python's unicodedata (the version the Unicode tables of src/origami/tokenizer are made from),
so the corpus holds no character that Origami's tables do not know.
"""
import random
import struct
import sys
import unicodedata as ud

rng = random.Random(19)

WORDS = ("the of and to in is was that for it with as his on be at by had not are but from or "
         "have an they which one you were her all she there would their we him been has when who "
         "will more no if out so said what up its about into than them can only other new some "
         "could time these two may then do first any my now such like our over man me even most "
         "made after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still "
         "own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take "
         "tokenizer merges vocabulary Llama Qwen SentencePiece byte-level Unicode").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL",
                "'D", "'M", "'x", "'"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>",
            "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
            "<think>", "</think>", "<tool_call>", "<|endoftext", "<|im_", "<0x41>", "<0xZZ>",
            "<|reserved_special_token_7|>", "<|fim_prefix|>"]


def assigned(lo, hi):
    out = []
    for c in range(lo, hi):
        if 0xD800 <= c < 0xE000:
            continue
        if ud.category(chr(c)) != "Cn":
            out.append(chr(c))
    return out


ALL_ASSIGNED = assigned(0, 0x110000)
CJK = assigned(0x4E00, 0xA000)
KANA = assigned(0x3041, 0x3097) + assigned(0x30A1, 0x30FB)
HANGUL = assigned(0xAC00, 0xD7A4)
CJK_PUNCT = assigned(0x3000, 0x3040) + assigned(0xFF01, 0xFF5F)
CJK_EXT_B = assigned(0x20000, 0x2A6E0)
SCRIPTS = {
    "cyrillic": assigned(0x0410, 0x0450), "greek": assigned(0x0391, 0x03CA),
    "arabic": assigned(0x0621, 0x064B), "hebrew": assigned(0x05D0, 0x05EB),
    "devanagari": assigned(0x0905, 0x0940), "thai": assigned(0x0E01, 0x0E3A),
    "georgian": assigned(0x10D0, 0x10FB), "armenian": assigned(0x0531, 0x0557),
    "latin-ext": assigned(0x00C0, 0x0250),
}
MARKS = [chr(c) for c in (0x0300, 0x0301, 0x0302, 0x0303, 0x0308, 0x030A, 0x0323, 0x0327,
                          0x0331, 0x0345, 0x093C, 0x094D, 0x0E48, 0x05B4)]
EMOJI = (assigned(0x1F300, 0x1F600) + assigned(0x1F600, 0x1F650) + assigned(0x1F900, 0x1FA00)
         + assigned(0x2600, 0x2700))
SKIN = [chr(c) for c in range(0x1F3FB, 0x1F400)]
SPACES = [" ", " ", " ", "\t", "\n", "\r\n", "\r", "\u3000", "\u00a0", "\u0085", "\u2028",
          "\u2029", "\u200b", "\f", "\v", "\u2003", "\u202f", "\ufeff"]
DIGITS = ["0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",
          "\u0966\u0967\u0968\u0969\u096a", "\uff10\uff11\uff12\uff13\uff19", "\u00b2\u00b3\u00b9\u00bd",
          "\u2160\u2161\u216b\u2180", "\u2460\u2461\u2473"]


def pick(seq):
    return seq[rng.randrange(len(seq))]


def prose(n):
    out = []
    while sum(map(len, out)) < n:
        words = [pick(WORDS) for _ in range(rng.randint(3, 18))]
        words[0] = words[0].capitalize()
        if rng.random() < 0.3:
            i = rng.randrange(len(words))
            words[i] += pick(CONTRACTIONS)
        if rng.random() < 0.1:
            words = [w.upper() for w in words]
        s = " ".join(words) + pick([".", ".", "!", "?", "...", ";", ":", ",", " -", '."'])
        if rng.random() < 0.15:
            s = '"' + s + '"'
        out.append(s + pick([" ", " ", "  ", "\n", "\n\n", " "]))
    return "".join(out)


def code(n):
    out = []
    depth = 0
    newline = "\r\n" if rng.random() < 0.2 else "\n"
    indent = "\t" if rng.random() < 0.3 else " " * rng.choice([2, 4, 8])
    while sum(map(len, out)) < n:
        kind = rng.random()
        name = pick(WORDS).replace("-", "_") + str(rng.randint(0, 99))
        if kind < 0.2:
            line = "def %s(x, y=%d):" % (name, rng.randint(0, 1000))
            depth += 1
        elif kind < 0.35:
            line = "for (int i = 0; i < %d; ++i) {" % rng.randint(1, 10 ** rng.randint(1, 9))
            depth += 1
        elif kind < 0.5 and depth > 0:
            line = "}" if rng.random() < 0.5 else "return %s;" % name
            depth -= 1
        elif kind < 0.6:
            line = "// %s" % prose(rng.randint(10, 60)).strip()
        elif kind < 0.7:
            line = 's = "%s\\n\\t%%d" %% (%s[%d])' % (pick(WORDS), name, rng.randint(0, 9))
        elif kind < 0.8:
            line = "x%s= (a[i] << %d) | ~b->c && !d || e != f;" % (pick("+-*/|&^"), rng.randint(0, 31))
        else:
            line = "%s = {%s}" % (name, ", ".join('"%s": %s' % (pick(WORDS), rng.random()) for _ in range(rng.randint(1, 5))))
        out.append(indent * max(depth, 0) + line + (" " * rng.randint(0, 3) if rng.random() < 0.1 else "") + newline)
        if rng.random() < 0.05:
            out.append(newline * rng.randint(1, 4))
    return "".join(out)


def cjk(n):
    out = []
    while sum(map(len, out)) < n // 3:
        r = rng.random()
        if r < 0.45:
            out.append("".join(pick(CJK) for _ in range(rng.randint(1, 30))))
        elif r < 0.6:
            out.append("".join(pick(KANA) for _ in range(rng.randint(1, 20))))
        elif r < 0.75:
            out.append("".join(pick(HANGUL) for _ in range(rng.randint(1, 8))) + " ")
        elif r < 0.8:
            out.append("".join(pick(CJK_EXT_B) for _ in range(rng.randint(1, 5))))
        elif r < 0.9:
            out.append(pick(CJK_PUNCT))
        else:
            out.append(pick([" ", "\n", pick(WORDS), str(rng.randint(0, 99999))]))
    return "".join(out)


def emoji(n):
    out = []
    while sum(len(s.encode()) for s in out) < n:
        r = rng.random()
        if r < 0.4:
            out.append(pick(EMOJI))
        elif r < 0.55:
            out.append(pick(EMOJI) + pick(SKIN))
        elif r < 0.7:
            out.append("\u200d".join(pick(EMOJI) for _ in range(rng.randint(2, 4))) + "\ufe0f")
        elif r < 0.8:
            out.append(chr(0x1F1E6 + rng.randrange(26)) + chr(0x1F1E6 + rng.randrange(26)))
        elif r < 0.85:
            out.append(pick("0123456789#*") + "\ufe0f\u20e3")
        else:
            out.append(pick([" ", "  ", "\n", " " + pick(WORDS) + " ", "!!", "..."]))
    return "".join(out)


def whitespace(n):
    out = []
    while sum(map(len, out)) < n:
        r = rng.random()
        if r < 0.3:
            out.append(" " * rng.randint(1, 300))
        elif r < 0.5:
            out.append("".join(pick(SPACES) for _ in range(rng.randint(1, 80))))
        elif r < 0.6:
            out.append("\n" * rng.randint(1, 50))
        elif r < 0.65:
            out.append("\t" * rng.randint(1, 40))
        else:
            out.append(pick([pick(WORDS), str(rng.randint(0, 999)), "(", "{", "!", "'s", pick(CJK), pick(EMOJI)]))
    return "".join(out)


def digits(n):
    out = []
    while sum(map(len, out)) < n:
        r = rng.random()
        if r < 0.4:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 40))))
        elif r < 0.55:
            out.append("%d.%d" % (rng.randint(0, 10 ** 6), rng.randint(0, 10 ** 8)))
        elif r < 0.65:
            out.append("{:,}".format(rng.randint(0, 10 ** 12)))
        elif r < 0.8:
            d = pick(DIGITS)
            out.append("".join(pick(d) for _ in range(rng.randint(1, 12))))
        else:
            out.append(pick([" ", " ", "\n", "-", "+", "x", " $", "%", " v", "1e-9", "0x1F", " " + pick(WORDS)]))
    return "".join(out)


def mixed(n):
    out = []
    while sum(map(len, out)) < n:
        r = rng.random()
        if r < 0.5:
            letters = SCRIPTS[pick(sorted(SCRIPTS))]
            out.append("".join(pick(letters) for _ in range(rng.randint(1, 12))))
        elif r < 0.65:  # decomposed accents, in either mark order (NFC reorders and composes)
            out.append(pick("aeiouAEIOUnNcCsSzZyY") + "".join(pick(MARKS) for _ in range(rng.randint(1, 3))))
        elif r < 0.72:  # conjoining jamo: L V (T)
            s = chr(0x1100 + rng.randrange(19)) + chr(0x1161 + rng.randrange(21))
            if rng.random() < 0.5:
                s += chr(0x11A8 + rng.randrange(27))
            out.append(s)
        elif r < 0.76:  # NFC singletons and compatibility characters
            out.append(pick(["\u212b", "\u2126", "\u212a", "\ufb01", "\u1e9b\u0323", "\u0344", "\u0f73", "\u2000"]))
        elif r < 0.85:
            out.append(ud.normalize("NFD", pick(WORDS + ["café", "naïve", "Ångström", "über", "Œuvre", "ḍ̇"])))
        else:
            out.append(pick([" ", " ", "\n", pick(WORDS), "-", ", ", pick(CONTRACTIONS)]))
    return "".join(out)


def random_code_points(n):
    out = []
    while sum(map(len, out)) < n:
        out.append("".join(pick(ALL_ASSIGNED) for _ in range(rng.randint(1, 20))))
        out.append(pick([" ", "", "\n", " " + pick(WORDS)]))
    return "".join(out)


def specials(n):
    out = []
    while sum(map(len, out)) < n:
        r = rng.random()
        if r < 0.4:
            out.append(pick(SPECIALS))
        elif r < 0.5:
            out.append(pick(SPECIALS) + pick(SPECIALS))
        else:
            out.append(pick([" ", "\n", prose(rng.randint(5, 80)), "user\n", pick(CJK)]))
    return "".join(out)


GENERATORS = [prose, code, cjk, emoji, whitespace, digits, mixed, random_code_points, specials]

INVALID = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xfe", b"\xc3",
           b"\xe2\x82", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xe2\x28\xa1", b"\xc3\x28", b"\xf8\x88\x80\x80\x80"]


def with_invalid(text):
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 40)):
        at = rng.randrange(len(data) + 1)
        data[at:at] = pick(INVALID) if rng.random() < 0.8 else bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
    if rng.random() < 0.3:
        data += pick([b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98"])  # truncated at the end
    return bytes(data)


def main():
    docs = []
    total = 0
    i = 0
    while total < 1_250_000:
        gen = GENERATORS[i % len(GENERATORS)]
        size = rng.choice([40, 200, 1000, 3000, 6000, 12000]) if i % 37 else 60000
        if i % 5 == 4:  # a document of several kinds
            text = "".join(g(size // 3) for g in rng.sample(GENERATORS, 3))
        else:
            text = gen(size)
        data = with_invalid(text) if i % 7 == 3 else text.encode()
        if data:
            docs.append(data)
            total += len(data)
        i += 1
    docs.append(b"\xff\xfe\x80")                      # nothing valid at all
    docs.append("\ufeffBOM first".encode())          # a byte-order mark stays text
    docs.append(b" ")
    docs.append(b"a")
    docs.append((" " * 5000 + "x").encode())
    with open(sys.argv[1], "wb") as f:
        for d in docs:
            f.write(struct.pack("<I", len(d)))
            f.write(d)
    print("make_corpus: %d documents, %d bytes" % (len(docs), total), file=sys.stderr)


if __name__ == "__main__":
    main()
