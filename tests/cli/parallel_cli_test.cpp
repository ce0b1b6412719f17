// `origami train` with the parallel strategies: each strategy's printed losses equal the
// single-device run's (same seed, same data), on threads and under mpirun; plans that cannot
// work are refused with exit code 2 and a message naming the constraint.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_run.h"
#include "origami/cli/train_command.h"
#include "origami/model/config.h"

namespace {

using ::testing::HasSubstr;
using origami::cli_test::CliRun;
using origami::cli_test::origami;
using origami::cli_test::losses;

const std::string kJob =
    "train --model tiny --seq 32 --batch 2 --steps 3 --log-every 1 "
    "--threads 1 --seed 5 ";

// --batch is each data-parallel replica's micro-batch: under dp=2 the one device's 2
// sequences per micro-batch are --batch 1 per replica.
std::string job_for(const std::string& flags) {
  if (flags.find("dp=2") == std::string::npos && flags.find("--strategy dp") == std::string::npos)
    return kJob + flags;
  std::string job = kJob;
  job.replace(job.find("--batch 2"), 9, "--batch 1");
  return job + flags;
}

// The launcher prefix of a run over `np` MPI processes. Open MPI keeps allocations until exit
// (as in tests/comm): no leak check.
std::string mpirun(int np) {
  return "ASAN_OPTIONS=detect_leaks=0 " + std::string(ORIGAMI_BINARY_DIR) +
         "/tests/comm/origami_mpirun " + std::to_string(np) + " ";
}

TEST(ParallelCli, EveryStrategyPrintsTheSingleDeviceLosses) {
  const CliRun single = origami(kJob + "--strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  const std::vector<std::string> want = losses(single.all());
  ASSERT_EQ(want.size(), 3u) << single.all();
  for (const std::string flags :
       {"--recompute full", "--strategy dp --degree 2", "--strategy tp --degree 2 --recompute mlp",
        "--strategy tpsp --degree 2 --recompute full",
        "--strategy tp --tp-sequence-parallel --degree 2",
        "--strategy cp --degree 2 --layout contiguous", "--strategy sp --degree 2",
        "--strategy tp --mesh tp=2,sp=2", "--strategy tp --mesh dp=2,tp=2 --grad-accum 1",
        "--strategy tsp --degree 2", "--strategy tsp --mesh dp=2,tsp=2 --recompute full",
        "--strategy tsp --degree 2 --layout contiguous --recompute mlp",
        // Above tiny's 2 kv heads: each kv head replicated over 2 ranks.
        "--strategy tp --degree 4", "--strategy tsp --degree 4 --recompute full",
        // TSP's allgather schedule (docs/tsp.md).
        "--strategy tsp --degree 2 --tsp-schedule allgather", ""}) {
    const CliRun r = origami(job_for(flags));
    ASSERT_EQ(r.code, 0) << flags << "\n" << r.all();
    EXPECT_EQ(losses(r.all()), want) << flags << "\n" << r.all();
    if (std::string(flags).find("--strategy") != std::string::npos) {
      EXPECT_THAT(r.all(), HasSubstr("peak memory per rank")) << flags;
    }
  }
}

TEST(ParallelCli, GradientAccumulationMatchesOneDevice) {
  const CliRun single = origami(kJob + "--grad-accum 2 --strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  const CliRun r = origami(job_for("--grad-accum 2 --strategy sp --mesh dp=2,sp=2 --recompute mlp"));
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_EQ(losses(r.all()), losses(single.all())) << r.all();
  EXPECT_EQ(losses(r.all()).size(), 3u);
}

// Pipeline stages (tiny: 2 layers, one per stage) under tsp 2 and under dp 2: the one
// device's losses with the same 3 micro-batches per step, and the stage layout, the 1F1B
// bubble formula and the measured bubble printed (its figure is timing: not checked here).
TEST(ParallelCli, PipelineStagesPrintTheSingleDeviceLossesAndTheirLayout) {
  const CliRun single = origami(kJob + "--grad-accum 3 --strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  for (const std::string flags : {"--grad-accum 3 --mesh pp=2,tsp=2",
                                  "--grad-accum 3 --mesh pp=2,dp=2 --pp-layers 1,1"}) {
    const CliRun r = origami(job_for(flags));
    ASSERT_EQ(r.code, 0) << flags << "\n" << r.all();
    EXPECT_EQ(losses(r.all()), losses(single.all())) << flags << "\n" << r.all();
    EXPECT_THAT(r.all(), HasSubstr("pipeline: 2 stages, 1F1B over 3 micro-batches")) << flags;
    EXPECT_THAT(r.all(), HasSubstr("stage 0: layers 0..0 + embedding")) << flags;
    EXPECT_THAT(r.all(), HasSubstr("stage 1: layers 1..1 + final norm, LM head")) << flags;
    EXPECT_THAT(r.all(), HasSubstr("bubble (p-1)/m = 1/3 = 0.333")) << flags;
    EXPECT_THAT(r.all(), HasSubstr("pipeline bubble, measured")) << flags;
    EXPECT_THAT(r.all(), HasSubstr("formula (p-1)/(m+p-1) = 25.0%):  stage 0 ")) << flags;
  }
}

// Interleaved 1F1B from the CLI (model small: 4 layers, so pp 2 x 2 chunks of one layer): the
// one device's losses, each stage's two chunks and the interleaved bubble formula printed.
TEST(ParallelCli, InterleavedPipelinePrintsTheSingleDeviceLossesAndItsChunks) {
  const std::string job = "train --model small --seq 32 --batch 2 --steps 2 --log-every 1 "
                          "--threads 1 --seed 5 --grad-accum 2 ";
  const CliRun single = origami(job + "--strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  const CliRun r = origami(job + "--mesh pp=2 --pp-virtual 2");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_EQ(losses(r.all()), losses(single.all())) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("interleaved 1F1B (2 chunks a rank) over 2 micro-batches"));
  EXPECT_THAT(r.all(), HasSubstr("stage 0: layers 0..0 + embedding; layers 2..2"));
  EXPECT_THAT(r.all(), HasSubstr("stage 1: layers 1..1; layers 3..3 + final norm, LM head"));
  EXPECT_THAT(r.all(), HasSubstr("bubble (p-1)/(v m) = 1/(2x2) = 0.250"));
  EXPECT_THAT(r.all(), HasSubstr("formula (p-1)/(vm+p-1) = 20.0%"));
  // Interleaving needs the micro-batches in groups of pp: refused before any rank starts.
  const CliRun odd = origami("train --model small --seq 32 --batch 2 --steps 1 --grad-accum 3 "
                             "--mesh pp=2 --pp-virtual 2");
  EXPECT_EQ(odd.code, 2) << odd.all();
  EXPECT_THAT(odd.all(), HasSubstr("--grad-accum 3 under pp=2 with --pp-virtual 2"));
  EXPECT_THAT(odd.all(), HasSubstr("use --grad-accum 2"));
}

// --global-batch, the other way to say the batch (global = micro-batch x dp x grad-accum):
// what is not given is derived and said, and the run is the one device's with the same
// global batch; contradictions are refused with exit 2 naming the flags and a value that works.
TEST(ParallelCli, GlobalBatchDerivesTheSplitAndRefusesContradictions) {
  const std::string job = "train --model tiny --seq 32 --steps 2 --log-every 1 --threads 1 "
                          "--seed 5 ";
  const CliRun single = origami(job + "--strategy single --batch 2 --grad-accum 2");
  ASSERT_EQ(single.code, 0) << single.all();
  const CliRun accum =
      origami(job + "--strategy tsp --mesh dp=2,tsp=2 --micro-batch 1 --global-batch 4");
  ASSERT_EQ(accum.code, 0) << accum.all();
  EXPECT_THAT(accum.all(), HasSubstr("--global-batch 4: --grad-accum 2"));
  EXPECT_THAT(accum.all(), HasSubstr("global batch 4 (2 x micro-batch 1 per replica x dp 2)"));
  EXPECT_EQ(losses(accum.all()), losses(single.all())) << accum.all();
  const CliRun micro = origami(job + "--strategy dp --degree 2 --grad-accum 2 --global-batch 4");
  ASSERT_EQ(micro.code, 0) << micro.all();
  EXPECT_THAT(micro.all(), HasSubstr("--micro-batch 1 per replica"));
  EXPECT_EQ(losses(micro.all()), losses(single.all())) << micro.all();
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"--strategy dp --degree 2 --micro-batch 2 --grad-accum 2 --global-batch 6",
            "--global-batch 6 contradicts --micro-batch 2 x dp 2 x --grad-accum 2 = 8"},
           {"--strategy dp --degree 2 --micro-batch 2 --grad-accum 2 --global-batch 6",
            "or --global-batch 8"},
           {"--strategy dp --degree 2 --micro-batch 3 --global-batch 4", "use --global-batch 6"},
           {"--strategy dp --degree 2 --grad-accum 3 --global-batch 4", "use --global-batch 6"},
           {"--strategy dp --degree 2 --global-batch -2", "--global-batch must be at least 1"},
       }) {
    const CliRun r = origami(job + b.flags);
    EXPECT_EQ(r.code, 2) << b.flags << "\n" << r.all();
    EXPECT_THAT(r.all(), HasSubstr(b.message)) << b.flags;
  }
  // The dry run resolves it the same way, and counts every replica's tokens.
  const CliRun dry = origami("train --dry-run --model tiny --seq 32 --mesh dp=2,tsp=2 "
                             "--global-batch 4");
  ASSERT_EQ(dry.code, 0) << dry.all();
  EXPECT_THAT(dry.all(), HasSubstr("--global-batch 4: --micro-batch 2 per replica"));
  EXPECT_THAT(dry.all(), HasSubstr("2 x 32 tokens per replica x 1 micro-batches"));
  // The convention is stated where the flags are.
  const CliRun help = origami("train --help");
  EXPECT_THAT(help.all(), HasSubstr("EACH data-parallel replica"));
  EXPECT_THAT(help.all(), HasSubstr("--global-batch"));
  EXPECT_THAT(origami("plan --help").all(), HasSubstr("EACH data-parallel replica"));
}

TEST(ParallelCli, UnderMpirunTheMpiTransportIsChosen) {
  const CliRun single = origami(kJob + "--strategy single");
  const CliRun r = origami(kJob + "--strategy tp --mesh tp=2,sp=2", mpirun(4));
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("on 4 ranks (mpi)"));
  EXPECT_EQ(losses(r.all()), losses(single.all())) << r.all();
}

// The README's main job: no strategy named runs TSP over 4 in-process ranks and closes with
// every rank's peaks beside one device's; on this model each rank holds a quarter of one
// device's parameters (plus the replicated norms).
TEST(ParallelCli, DefaultIsTspOverFourRanksWithTheOneDeviceReport) {
  const CliRun r = origami("train --model small --seq 64 --batch 2 --steps 1 --threads 1");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("tsp=4 zigzag on 4 ranks (threads)"));
  EXPECT_THAT(r.all(), HasSubstr("peak memory per rank"));
  EXPECT_THAT(r.all(), HasSubstr("\n3 "));
  EXPECT_THAT(r.all(), HasSubstr("\n1dev"));
  EXPECT_THAT(r.all(), HasSubstr("12.57 MiB"));  // one device's parameters
  EXPECT_THAT(r.all(), HasSubstr("3.15 MiB"));   // a rank's: (12.57 MiB - norms) / 4 + norms
  const CliRun single =
      origami("train --model small --seq 64 --batch 2 --steps 1 --threads 1 --strategy single");
  EXPECT_EQ(losses(r.all()), losses(single.all())) << r.all();
  // The tiny model's 2 kv heads: degree 4 is a multiple of them (each kv head on two ranks).
  const CliRun tiny = origami(kJob);
  ASSERT_EQ(tiny.code, 0) << tiny.all();
  EXPECT_THAT(tiny.all(), HasSubstr("tsp=4 zigzag on 4 ranks"));
  EXPECT_EQ(losses(tiny.all()), losses(origami(kJob + "--strategy single").all())) << tiny.all();
}

// The default degree follows the registry's rule (parallel::validate_plan): the largest of 4,
// 3, 2 that divides the heads and the MLP width, divides the kv heads or is a multiple of
// them, and splits the sequence in the layout; else 1.
TEST(ParallelCli, DefaultTspDegreeIsTheLargestTheRegistryAccepts) {
  using origami::cli::default_tsp_degree;
  const origami::ModelConfig tiny = origami::model_preset("tiny");  // 4 heads, 2 kv, f 160
  EXPECT_EQ(default_tsp_degree(tiny, 32, "zigzag"), 4);             // 4 = 2 x kv heads
  EXPECT_EQ(default_tsp_degree(tiny, 12, "zigzag"), 2);             // 12 % 8 != 0
  EXPECT_EQ(default_tsp_degree(tiny, 12, "contiguous"), 4);
  EXPECT_EQ(default_tsp_degree(tiny, 7, "contiguous"), 1);
  origami::ModelConfig mqa = tiny;  // one kv head: every degree is a multiple
  mqa.num_key_value_heads = 1;
  EXPECT_EQ(default_tsp_degree(mqa, 32, "zigzag"), 4);
  origami::ModelConfig kv3 = tiny;  // 12 heads over 3 kv heads: 4 is neither, 3 divides
  kv3.hidden_size = 96;
  kv3.intermediate_size = 96;
  kv3.num_attention_heads = 12;
  kv3.num_key_value_heads = 3;
  EXPECT_EQ(default_tsp_degree(kv3, 48, "zigzag"), 3);  // 48 splits 8 ways too
  origami::ModelConfig own_head_dim = tiny;  // an explicit head_dim splits like any other
  own_head_dim.explicit_head_dim = 32;
  EXPECT_EQ(default_tsp_degree(own_head_dim, 32, "zigzag"), 4);
  origami::ModelConfig odd_heads = tiny;  // 3 heads: no degree above 1 divides them
  odd_heads.hidden_size = 48;
  odd_heads.num_attention_heads = 3;
  odd_heads.num_key_value_heads = 1;
  EXPECT_EQ(default_tsp_degree(odd_heads, 32, "zigzag"), 1);
}

TEST(ParallelCli, TspUnderMpirunEqualsOneDevice) {
  const CliRun single = origami(kJob + "--strategy single");
  const CliRun r = origami(kJob + "--strategy tsp --degree 2", mpirun(2));
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("tsp=2 zigzag on 2 ranks (mpi)"));
  EXPECT_EQ(losses(r.all()), losses(single.all())) << r.all();
}

// TSP in bf16 between MPI processes: the bf16 shards broadcast and ringed over the MPI
// transport give the threads transport's losses exactly (the same schedule and reductions).
TEST(ParallelCli, Bf16TspUnderMpirunEqualsThreads) {
  const std::string job = kJob + "--strategy tsp --degree 2 --precision bf16";
  const CliRun threads = origami(job);
  ASSERT_EQ(threads.code, 0) << threads.all();
  const CliRun r = origami(job, mpirun(2));
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("tsp=2 zigzag on 2 ranks (mpi)"));
  EXPECT_THAT(r.all(), HasSubstr("precision: bf16 compute copy"));
  EXPECT_EQ(losses(r.all()).size(), 3u) << r.all();
  EXPECT_EQ(losses(r.all()), losses(threads.all())) << r.all() << threads.all();
}

// The per-replica micro-batch over MPI processes: dp=2 x tsp=2 at --batch 1 per replica
// prints the one device's losses at --batch 2.
TEST(ParallelCli, DpTimesTspUnderMpirunAtOnePerReplicaEqualsOneDevice) {
  const CliRun single = origami(kJob + "--strategy single");
  const CliRun r = origami(job_for("--strategy tsp --mesh dp=2,tsp=2"), mpirun(4));
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("on 4 ranks (mpi)"));
  EXPECT_THAT(r.all(), HasSubstr("global batch 2 (1 x micro-batch 1 per replica x dp 2)"));
  EXPECT_EQ(losses(r.all()), losses(single.all())) << r.all();
}

// Checkpoints across pipeline stages between MPI processes: pp=2 x dp=2 with the optimizer
// sharded over dp (ZeRO-1) saves after step 2 under mpirun (each stage's processes write
// their stage's tensors, the moments gathered over dp); resumed on threads under pp=2 x tsp=2,
// step 3 prints the one device's loss.
TEST(ParallelCli, PipelineCheckpointUnderMpirunResumesUnderAnotherLayout) {
  const std::string dir = origami::cli_test::temp_base() + "_pp_ckpt";
  const CliRun single = origami(kJob + "--grad-accum 2 --strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  const CliRun saved = origami(
      job_for("--grad-accum 2 --mesh pp=2,dp=2 --shard-optimizer --save-every 2 --save-dir " + dir),
      mpirun(4));
  ASSERT_EQ(saved.code, 0) << saved.all();
  EXPECT_THAT(saved.all(), HasSubstr("on 4 ranks (mpi)"));
  EXPECT_THAT(saved.all(), HasSubstr("AdamW state sharded over dp 2"));
  EXPECT_EQ(losses(saved.all()), losses(single.all())) << saved.all();
  const CliRun resumed =
      origami(kJob + "--grad-accum 2 --mesh pp=2,tsp=2 --resume " + dir + "/step-00000002");
  ASSERT_EQ(resumed.code, 0) << resumed.all();
  EXPECT_THAT(resumed.all(), HasSubstr("resumed from " + dir + "/step-00000002 at step 2"));
  const std::vector<std::string> want = losses(single.all());
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(losses(resumed.all()), std::vector<std::string>{want[2]}) << resumed.all();
  std::filesystem::remove_all(dir);
}

// Bad input found on the ranks of an MPI job ends the job with the same code as on one
// process (2), every rank's message naming the constraint.
TEST(ParallelCli, UnderMpirunBadInputExitsTwo) {
  const CliRun r =
      origami("train --model tiny --seq 33 --strategy sp --degree 2 --steps 1", mpirun(2));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("rank 0: error: zigzag layout needs the sequence length"));
}

// A pipeline mesh whose axes do not multiply to mpirun's world (pp=2 x tsp=2 on 2 processes)
// is refused on every rank before any stage starts: exit 2, naming the mesh and the world.
TEST(ParallelCli, UnderMpirunAPipelineMeshOfAnotherWorldExitsTwo) {
  const CliRun r = origami(kJob + "--mesh pp=2,tsp=2", mpirun(2));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("needs 4 ranks but the world has 2"));
}

TEST(ParallelCli, RefusesPlansThatCannotWork) {
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"--strategy tp --degree 8", "largest degree that works is 4"},  // tiny: 4 heads
           {"--strategy tp --degree 3", "attention heads"},
           {"--strategy sp --degree 3", "2 x degree"},  // 32 % 6 != 0
           // dp=3 runs (each replica its own micro-batch); a global batch it cannot make does not.
           {"--strategy dp --degree 3 --global-batch 4", "--micro-batch 2 x dp 3 = 6"},
           {"--strategy tp --degree 2 --mesh tp=2", "either --degree or --mesh"},
           {"--strategy sp --mesh sp=2,tp=2", "does not use a tp axis"},
           {"--strategy tsp2", "unknown strategy"},
           {"--strategy tsp --mesh tp=2,tsp=2", "does not use a tp axis"},
           {"--strategy tp --degree 2 --recompute some", "unknown recompute policy"},
           {"--strategy sp --degree 2 --layout spiral", "unknown token layout"},
           {"--strategy sp --degree 2 --layout balanced", "needs --document-masking"},
           {"--strategy tp --degree 2 --layout balanced --document-masking", "splits no sequence"},
           {"--strategy tp --degree 2 --backend mpi", "needs the program started by mpirun"},
           {"--strategy tp --degree 2 --backend carrier-pigeon", "unknown --backend"},
           // Pipeline stages (tiny: 2 layers): the split is checked before any rank starts,
           // and what stages do not run with yet is refused up front.
           {"--mesh pp=3", "pp=3 pipeline stages over a model of 2 layers: every stage"},
           {"--mesh pp=2,tsp=2 --pp-layers 1,2", "--pp-layers 1,2 sums to 3 layers"},
           {"--mesh pp=2,tsp=2 --pp-layers 2", "gives 1 stages but the mesh has pp=2"},
           {"--mesh pp=2 --pp-layers 1,x", "item 2 ('x')"},
           {"--mesh pp=2 --pp-virtual 2",
            "pp=2 x --pp-virtual 2 = 4 model chunks over a model of 2 layers"},
           {"--mesh pp=2 --pp-virtual 0", "--pp-virtual 0: each pipeline rank holds at least"},
           {"--mesh dp=2 --pp-virtual 2", "interleaving needs pp=2 or more"},
           // The micro-batches (--grad-accum) of a pipeline step must make the global batch.
           {"--mesh pp=2,dp=2 --grad-accum 3 --global-batch 8",
            "--global-batch 8 contradicts --micro-batch 2 x dp 2 x --grad-accum 3 = 12"},
       }) {
    const CliRun r = origami(kJob + b.flags);
    EXPECT_EQ(r.code, 2) << b.flags << "\n" << r.all();
    EXPECT_THAT(r.all(), HasSubstr(b.message)) << b.flags;
  }
}

// --tsp-schedule: an unknown word, or a schedule for a layout without a tsp axis, exits 2
// naming the flag and what to use, in a real run, a dry run and the planner's --tsp-schedules.
TEST(ParallelCli, RefusesABadTspSchedule) {
  struct Bad {
    std::string command;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {kJob + "--strategy tsp --degree 2 --tsp-schedule ring", "use broadcast-ring"},
           {kJob + "--strategy tsp --degree 2 --tsp-schedule ''", "is not a TSP schedule"},
           {kJob + "--strategy tp --degree 2 --tsp-schedule allgather", "has no tsp axis"},
           {kJob + "--strategy single --tsp-schedule allgather", "use --strategy tsp"},
           {"train --dry-run --model tiny --seq 32 --strategy sp --degree 2 --tsp-schedule "
            "allgather",
            "has no tsp axis"},
           {"plan --model tiny --seq 64 --world 2 --tsp-schedules broadcast-ring,gtp",
            "'gtp' is not a TSP schedule"},
       }) {
    const CliRun r = origami(b.command);
    EXPECT_EQ(r.code, 2) << b.command << "\n" << r.all();
    EXPECT_THAT(r.all(), HasSubstr(b.message)) << b.command;
    EXPECT_THAT(r.all(), HasSubstr("--tsp-schedule")) << b.command;
  }
}

// A degree that neither divides the kv heads nor is a multiple of them: exit 2, naming the
// field and a degree that works (12 heads over 4 kv heads at 6: 4 works).
TEST(ParallelCli, RefusesDegreesBesideTheKvHeads) {
  const std::string cfg = ::testing::TempDir() + "/kv4_config.json";
  std::ofstream(cfg) << R"({"vocab_size": 256, "hidden_size": 96, "intermediate_size": 96,
    "num_hidden_layers": 1, "num_attention_heads": 12, "num_key_value_heads": 4,
    "max_position_embeddings": 64})";
  for (const char* strategy : {"tp", "tsp"}) {
    const CliRun r = origami("train --config " + cfg + " --seq 24 --batch 2 --steps 1 --threads 1 "
                             "--strategy " + strategy + " --degree 6");
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_THAT(r.all(), HasSubstr("num_key_value_heads, 4")) << strategy;
    EXPECT_THAT(r.all(), HasSubstr("largest degree that works is 4")) << strategy;
  }
}

}  // namespace
