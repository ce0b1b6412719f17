#include "origami/train/checkpoint_loop.h"

#include <cstring>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/train/batch_size.h"
#include "origami/tokenizer/fingerprint.h"
#include "origami/train/preemption.h"
#include "origami/train/rank_agreement.h"

namespace origami::ckpt {

SaveDirLock open_save_dir(const TrainOptions& o, comm::Communicator* world, const Log& log) {
  SaveDirLock lock;
  const std::string& dir = o.checkpoint.save_dir;
  if (dir.empty()) return lock;
  on_every_rank(world, "opening --save-dir", [&] {
    if (world != nullptr && world->rank() != 0) return;
    lock = SaveDirLock::acquire(dir, log);
    remove_partial_files(dir, log);
  });
  return lock;
}

namespace {

// Resuming step N into a --save-dir that holds a newer complete checkpoint M would replace M
// when this run reaches it, and until then a restart would take M, not this run's newest.
void refuse_older_resume(const CheckpointOptions& c, const std::string& resumed) {
  if (c.resume.empty() || c.save_dir.empty()) return;
  const std::string newest = find_resume(CheckpointOptions{c.save_dir, 0, "", ""}, nullptr);
  if (newest.empty()) return;
  const std::int64_t mine = read_index(resumed).at("step").get<std::int64_t>();
  const std::int64_t theirs = read_index(newest).at("step").get<std::int64_t>();
  if (theirs > mine)
    throw ConfigError(fmt::format(
        "--resume {} (step {}) into --save-dir {}, which holds the newer complete checkpoint {} "
        "(step {}): this run would overwrite it; resume the newest (drop --resume), give another "
        "--save-dir, or remove {} first if it is to be discarded",
        resumed, mine, c.save_dir, newest, theirs, newest));
}

}  // namespace

std::int64_t begin_run(const TrainOptions& o, comm::Communicator* world, const RankState& st,
                       const Log& log) {
  const CheckpointOptions& c = o.checkpoint;
  if (c.save_every < 0)
    throw ConfigError(fmt::format("--save-every must be >= 0 (got {})", c.save_every));
  if (c.save_every > 0 && c.save_dir.empty())
    throw ConfigError("--save-every needs --save-dir");
  if (!c.init_from.empty() && !c.resume.empty())
    throw ConfigError("--init-from and --resume exclude each other (--resume continues a run, "
                      "--init-from starts a new one from its parameters)");
  if (!c.init_from.empty()) {
    on_every_rank(world, "loading --init-from", [&] {
      load(c.init_from, o.model, RankState{st.specs, st.params, nullptr});
    });
    log(fmt::format("initialised the parameters from {}", c.init_from));
    return 0;
  }
  const std::string dir = find_resume(c, log);
  if (dir.empty()) return 0;
  refuse_older_resume(c, dir);
  const nlohmann::json index = read_index(dir);
  const nlohmann::json& run = index.at("run");
  auto same = [&](const char* key, std::int64_t mine, const char* flag) {
    const std::int64_t saved = run.at(key).get<std::int64_t>();
    if (saved != mine)
      throw ConfigError(fmt::format("{}: saved with {} {}, this run has {} {}; a resumed run must "
                                    "draw the same batches (use --init-from to start afresh)",
                                    dir, flag, saved, flag, mine));
  };
  same("seed", static_cast<std::int64_t>(o.seed), "--seed");
  // The global batch, not its split (train() has already kept the saved one under another
  // dp, or refused): the batches' sequences are a pure function of the sequence index, so
  // step t + 1 starts at sequence t x global batch however it is split.
  const std::int64_t global = saved_global_batch(run);
  if (global != o.global_batch)
    throw ConfigError(fmt::format("{}: saved with global batch {}, this run has {}; a resumed run "
                                  "must draw the same batches (use --init-from to start afresh)",
                                  dir, global, o.global_batch));
  same("seq", o.seq, "--seq");
  // (Checkpoints from before --data-order existed were drawn in the random order.)
  const std::string order = run.value("data_order", std::string("random"));
  if (order != o.data_order)
    throw ConfigError(fmt::format("{}: saved with --data-order {}, this run has --data-order {}; "
                                  "a resumed run must draw the same batches (use --init-from "
                                  "to start afresh)",
                                  dir, order, o.data_order));
  // (Checkpoints from before --document-masking existed trained on unbroken rows.)
  const bool masked = run.value("document_masking", false);
  if (masked != o.document_masking)
    throw ConfigError(fmt::format("{}: saved {} --document-masking, this run {} it; a resumed "
                                  "run must train on the same rows (use --init-from to start "
                                  "afresh)",
                                  dir, masked ? "with" : "without",
                                  o.document_masking ? "has" : "does not have"));
  // (Checkpoints from before --eos-id existed had none.) The documents of a flat file follow
  // it, so a resume under another id would train on other rows.
  const std::int64_t eos = run.value("eos_id", std::int64_t{-1});
  if (eos != o.eos_id)
    throw ConfigError(fmt::format("{}: saved with {}, this run has {}; a resumed run must train "
                                  "on the same rows (use --init-from to start afresh)",
                                  dir, eos < 0 ? "no --eos-id" : fmt::format("--eos-id {}", eos),
                                  o.eos_id < 0 ? std::string("none")
                                               : fmt::format("--eos-id {}", o.eos_id)));
  const std::int64_t total = run.at("lr_schedule").at("total_steps").get<std::int64_t>();
  if (total != o.steps)
    log(fmt::format("note: {} was saved by a run of {} steps, this one has {}: the learning-rate "
                    "schedule follows the new total, so the run is not the saved run continued "
                    "bit for bit",
                    dir, total, o.steps));
  // (Checkpoints from before --precision existed trained in fp32.) Under either precision a
  // checkpoint holds the fp32 master weights and AdamW moments (core/precision.h), so another
  // precision loads them as they are: said, never silent.
  const std::string precision = run.value("precision", std::string("fp32"));
  if (precision != o.precision)
    log(fmt::format("note: {} was trained under --precision {}, this run has --precision {}: "
                    "its fp32 weights and AdamW moments load as they are and the linears now "
                    "read {}, so the run is not the saved run continued bit for bit",
                    dir, precision, o.precision,
                    o.precision == "bf16" ? "their bf16 rounding" : "them in fp32"));
  // Reported only once every rank has read and verified its part.
  on_every_rank(world, "loading the checkpoint", [&] { load(dir, o.model, st); });
  const std::int64_t step = st.optimizer->steps_taken();
  log(fmt::format("resumed from {} at step {} (saved from {})", dir, step,
                  run.at("layout").get<std::string>()));
  return step;
}

void after_step(const TrainOptions& o, comm::Communicator* world, const RankState& st,
                std::int64_t step, const std::string& layout, const Log& log) {
  const CheckpointOptions& c = o.checkpoint;
  // Every step boundary asks every rank (one small all-reduce): a stop signal on any rank
  // stops all of them after this step, saved.
  const int stop = agreed_stop_signal(world);
  const bool scheduled = step == o.steps || (c.save_every > 0 && step % c.save_every == 0);
  if (!c.save_dir.empty() && (scheduled || stop != 0)) save_step(o, world, st, step, layout, log);
  if (stop == 0) return;
  if (!c.save_dir.empty() && (world == nullptr || world->rank() == 0))
    remove_partial_files(c.save_dir, log);
  throw Preempted(stop, fmt::format("stopped by signal {} ({}) after step {}: {}", stop,
                                    strsignal(stop), step,
                                    c.save_dir.empty()
                                        ? std::string("nothing saved (no --save-dir)")
                                        : "saved; the same command resumes from --save-dir"));
}

void save_step(const TrainOptions& o, comm::Communicator* world, const RankState& st,
               std::int64_t step, const std::string& layout, const Log& log) {
  const CheckpointOptions& c = o.checkpoint;
  nlohmann::json run = {
      {"optimizer_steps", st.optimizer->steps_taken()},
      {"seed", o.seed},
      {"batch", o.batch},  // each data-parallel replica's micro-batch
      {"dp", o.global_batch / (o.batch * o.grad_accum)},
      {"seq", o.seq},
      {"grad_accum", o.grad_accum},
      {"global_batch", o.global_batch},  // batch x dp x grad_accum
      // The data cursor: batches are a pure function of (seed, batch index) in either order,
      // and their sequences of (seed, sequence index); a step draws global_batch sequences.
      {"batches_drawn", step * o.grad_accum},
      {"sequences_drawn", step * o.global_batch},
      {"data_order", o.data_order},
      {"document_masking", o.document_masking},
      {"eos_id", o.eos_id},
      {"precision", o.precision},
      {"grad_reduce_dtype", o.grad_reduce_dtype},  // (not state: gradients start each step at zero)
      {"lr_schedule",
       {{"step", step},
        {"total_steps", o.steps},
        {"warmup", o.warmup},
        {"peak", o.lr},
        {"min_ratio", o.min_lr_ratio},
        {"last_lr", learning_rate(step, o.steps, o.warmup, o.lr, o.min_lr_ratio)}}},
      // Initialisation and data draw Philox streams keyed by the seed: no other RNG state.
      {"rng", {{"kind", "philox"}, {"seed", o.seed}}},
      {"layout", layout},
      {"strategy", o.strategy},
      {"degree", o.degree},
      {"mesh", o.mesh},
      {"world", world ? world->size() : 1}};
  // The tokenizer the data was encoded with, for `generate --checkpoint` (absent: bytes).
  if (const auto t = tokenizer::fingerprint(o.tokenizer_path))
    run["tokenizer"] = {{"file", t->file}, {"fnv1a64", t->fnv1a64}};
  const std::string dir = save(world, c.save_dir, step, o.model, st, run);
  log(fmt::format("saved checkpoint {}", dir));
}

}  // namespace origami::ckpt
