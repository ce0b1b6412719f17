// Sharded checkpoints (docs/checkpoints.md).
//
// A checkpoint is a folder DIR/step-NNNNNNNN holding
//   rank-RRRRR.safetensors  the blocks world rank R writes: parameters under their Hugging Face
//                           names, AdamW moments under "optimizer.exp_avg.<name>" and
//                           "optimizer.exp_avg_sq.<name>"; a block held by several ranks
//                           (replicas over dp/sp, RMSNorm weights over tp) is written once,
//                           by the lowest world rank holding it
//   index.json              every tensor's global shape, dtype and blocks (file, global
//                           offset, shape, FNV-1a 64 checksum of the block's bytes), the model
//                           config, the layout it was saved from and the run state (step =
//                           optimizer steps taken = learning-rate schedule position, seed and
//                           data cursor: batches are a pure function of (seed, batch index))
//   COMPLETE                written last, after every rank finished (a barrier); a reader only
//                           trusts a folder that has it.
// Every file is written atomically (temporary file, fsync, rename). Blocks are described by
// global offsets, never by a strategy's buffers, so any layout reads any other: each rank
// reads the intersection of what it needs with every saved block (read_block).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/checkpoint/checkpoint_options.h"
#include "origami/comm/communicator.h"
#include "origami/core/hash.h"
#include "origami/model/optimizer.h"
#include "origami/parallel/shard_spec.h"

namespace origami::ckpt {

using Log = std::function<void(const std::string&)>;

inline constexpr const char* kMarker = "COMPLETE";
inline constexpr const char* kIndex = "index.json";

// What one rank holds: its specs and the tensors they describe (named_tensors order).
struct RankState {
  const std::vector<parallel::ShardSpec>* specs = nullptr;
  ModelTensors* params = nullptr;
  AdamW* optimizer = nullptr;  // null: parameters only (export, --init-from)
};

// The folder name of the checkpoint of `step` inside `save_dir`.
std::string checkpoint_dir(const std::string& save_dir, std::int64_t step);

// Collective over `world` (null: a single process). Writes the checkpoint of `step`, the run
// description `run` (layout, seeds, schedule) going into the index. Returns the folder.
// ORIGAMI_CRASH_AT (tests only) ends the process at a named point of the protocol:
// before_shards, mid_shard, after_shards, after_index; "point@N" only while saving step N.
std::string save(comm::Communicator* world, const std::string& save_dir, std::int64_t step,
                 const ModelConfig& config, const RankState& state, const nlohmann::json& run);

// True when `dir` has the completion marker.
bool is_complete(const std::string& dir);

// Throws ConfigError, starting with `flag` (e.g. "--resume"), unless `dir` is a complete
// checkpoint. The message tells apart a missing folder, a --save-dir given instead of one of
// its step-N folders, a checkpoint whose save was interrupted, and an unrelated folder.
void require_complete(const std::string& dir, const std::string& flag);

// The checkpoint to resume from: `resume` if given (Error unless complete), else the newest
// complete step-* folder of `save_dir` (incomplete ones are reported through `log` and
// skipped), else "".
std::string find_resume(const CheckpointOptions& options, const Log& log);

// The index of a complete checkpoint (Error naming the file if unreadable).
nlohmann::json read_index(const std::string& dir);

// Loads a checkpoint (or, for --init-from, a Hugging Face folder with model.safetensors and
// config.json) into this rank's tensors. Everything is read into fresh buffers and verified
// (model shape, coverage, dtypes, checksums) before anything is swapped into `state`: on any
// error (an Error naming the file and the problem) the running state is untouched. With an
// optimizer, the moments and steps_taken are restored too. Returns the index ({} for a
// Hugging Face folder).
nlohmann::json load(const std::string& dir, const ModelConfig& config, const RankState& state);

// The block checksum is FNV-1a 64 (core/hash.h).
using origami::fnv1a64;

}  // namespace origami::ckpt
