#include "origami/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/io/hf_weights.h"
#include "origami/io/safetensors.h"
#include "origami/io/text_file.h"

namespace origami::ckpt {

namespace fs = std::filesystem;

std::string checkpoint_dir(const std::string& save_dir, std::int64_t step) {
  return fmt::format("{}/step-{:08d}", save_dir, step);
}

bool is_complete(const std::string& dir) { return fs::is_regular_file(fs::path(dir) / kMarker); }

namespace {

// The last component of a folder's path ("a/step-2/" -> "step-2").
std::string folder_name(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

std::string rank_file(int rank) { return fmt::format("rank-{:05d}.safetensors", rank); }
std::string hex(std::uint64_t v) { return fmt::format("{:016x}", v); }

// The kinds of tensor a checkpoint holds for each parameter.
const char* const kKinds[] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};

// One rank's block of a tensor, always as two dimensions (a vector is [n, 1]); rows beyond
// the global shape (vocabulary padding) are dropped: they are not part of the model.
struct Block {
  std::int64_t off0 = 0, off1 = 0, rows = 0, cols = 0;
  bool operator==(const Block&) const = default;
};

Block block_of(const parallel::ShardSpec& s) {
  Block b;
  b.off0 = s.offset.at(0);
  b.off1 = s.offset.size() > 1 ? s.offset[1] : 0;
  b.rows = std::max<std::int64_t>(0, std::min(s.local.at(0), s.global.at(0) - b.off0));
  b.cols = s.local.size() > 1 ? s.local[1] : 1;
  return b;
}

Shape to_shape(const Block& b, std::size_t rank) {
  return rank == 1 ? Shape{b.rows} : Shape{b.rows, b.cols};
}
Shape to_offset(const Block& b, std::size_t rank) {
  return rank == 1 ? Shape{b.off0} : Shape{b.off0, b.off1};
}

// Test hook: ends the process (rank 0 only) at a named point of the save protocol, while
// saving any step ("point") or one step ("point@N").
bool crash_requested(const char* point, int rank, std::int64_t step) {
  const char* at = std::getenv("ORIGAMI_CRASH_AT");
  if (at == nullptr || rank != 0) return false;
  const std::string spec = at;
  const std::size_t sep = spec.find('@');
  if (spec.substr(0, sep) != point) return false;
  return sep == std::string::npos || spec.substr(sep + 1) == std::to_string(step);
}
[[noreturn]] void crash(const char* point) {
  std::fprintf(stderr, "origami: ORIGAMI_CRASH_AT=%s: exiting while writing a checkpoint\n",
               point);
  std::fflush(stderr);
  std::_Exit(86);
}

void barrier(comm::Communicator* world) {
  if (world != nullptr) world->ibarrier().wait();
}

std::vector<Tensor*> kind_tensors(const RankState& st, int kind) {
  ModelTensors* t = kind == 0 ? st.params
                    : kind == 1 ? &st.optimizer->first_moment()
                                : &st.optimizer->second_moment();
  std::vector<Tensor*> out;
  for (NamedTensor& n : named_tensors(*t)) out.push_back(n.tensor);
  return out;
}

// Nothing non-finite is saved as complete (a NaN model would be resumed as if good). Every
// rank checks what it holds and all of them stop together: a throw on one rank alone would
// leave the others waiting in the next barrier until the timeout.
void refuse_non_finite(comm::Communicator* world, const RankState& st, std::int64_t step) {
  std::string first;  // the first tensor of this rank holding a non-finite value
  for (int kind = 0; kind < 3 && first.empty(); ++kind) {
    const std::vector<Tensor*> t = kind_tensors(st, kind);
    for (std::size_t i = 0; i < t.size() && first.empty(); ++i)
      for (float x : t[i]->span())
        if (!std::isfinite(x)) {
          first = kKinds[kind] + (*st.specs)[i].name;
          break;
        }
  }
  std::vector<std::int64_t> bad{first.empty() ? 0 : 1};
  if (world) world->all_reduce(bad, bad, comm::ReduceOp::Max);
  if (bad[0] == 0) return;
  throw Error(first.empty()
                  ? fmt::format("refusing to save step {}: another rank holds a non-finite value",
                                step)
                  : fmt::format("refusing to save step {}: tensor {} holds a non-finite value "
                                "(NaN or inf); lower --lr or check the data",
                                step, first));
}

}  // namespace

std::string save(comm::Communicator* world, const std::string& save_dir, std::int64_t step,
                 const ModelConfig& config, const RankState& st, const nlohmann::json& run) {
  ORIGAMI_CHECK(st.specs != nullptr && st.params != nullptr && st.optimizer != nullptr,
                "checkpoint save needs the specs, parameters and optimizer");
  const int rank = world ? world->rank() : 0, W = world ? world->size() : 1;
  const std::vector<parallel::ShardSpec>& specs = *st.specs;
  const std::size_t n = specs.size();
  const std::string dir = checkpoint_dir(save_dir, step);
  refuse_non_finite(world, st, step);
  if (rank == 0) {
    // A folder of this step left by an earlier run: drop its marker first, so that it can
    // never look complete while being rewritten.
    std::error_code ec;
    fs::remove(fs::path(dir) / kMarker, ec);
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
      throw Error(fmt::format("cannot create the checkpoint folder {}: {}", dir, ec.message()));
    if (crash_requested("before_shards", rank, step)) crash("before_shards");
  }
  // Every rank's blocks, so that a block held by several ranks is written once (by the
  // lowest world rank holding it) and rank 0 can describe all of them in the index.
  std::vector<std::int64_t> mine(n * 4), all(n * 4 * static_cast<std::size_t>(W));
  for (std::size_t i = 0; i < n; ++i) {
    const Block b = block_of(specs[i]);
    mine[i * 4 + 0] = b.off0;
    mine[i * 4 + 1] = b.off1;
    mine[i * 4 + 2] = b.rows;
    mine[i * 4 + 3] = b.cols;
  }
  if (world) world->all_gather(mine, all);
  else all = mine;
  barrier(world);  // the folder exists
  auto block_at = [&](int r, std::size_t i) {
    const std::int64_t* p = &all[(static_cast<std::size_t>(r) * n + i) * 4];
    return Block{p[0], p[1], p[2], p[3]};
  };
  auto writer_of = [&](int r, std::size_t i) {
    const Block b = block_at(r, i);
    if (b.rows == 0) return false;
    for (int q = 0; q < r; ++q)
      if (block_at(q, i) == b) return false;
    return true;
  };

  // A sharded optimizer (ZeRO-1) holds 1/dp of each moment: gathered over dp here, so the
  // checkpoint is the unsharded one and any layout, sharded or not, reads it
  // (docs/checkpoints.md, "Sharded optimizer").
  std::vector<std::vector<Tensor>> gathered(3);
  if (st.optimizer->sharded())
    for (int kind = 1; kind < 3; ++kind)
      gathered[static_cast<std::size_t>(kind)] =
          st.optimizer->gather_moment(kind - 1, *st.params, *st.params->embed.tracker());
  io::SafetensorsWriter writer;
  nlohmann::json sums = nlohmann::json::object();
  bool any = false;
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<Tensor*> t = kind_tensors(st, kind);
    if (!gathered[static_cast<std::size_t>(kind)].empty())
      for (std::size_t i = 0; i < t.size(); ++i) t[i] = &gathered[static_cast<std::size_t>(kind)][i];
    for (std::size_t i = 0; i < n; ++i) {
      if (!writer_of(rank, i)) continue;
      const Block b = block_at(rank, i);
      const std::string name = kKinds[kind] + specs[i].name;
      // The valid rows of a local block are a prefix of its row-major buffer.
      const std::size_t bytes = static_cast<std::size_t>(b.rows * b.cols) * sizeof(float);
      writer.add(name, DType::F32, to_shape(b, specs[i].global.size()), t[i]->raw());
      sums[name] = hex(fnv1a64(t[i]->raw(), bytes));
      any = true;
    }
  }
  if (any) {
    writer.set_metadata("origami.checksums", sums.dump());
    const std::string path = dir + "/" + rank_file(rank);
    if (crash_requested("mid_shard", rank, step)) {
      // What a kill in the middle of a write leaves: a truncated file.
      const std::vector<std::uint8_t> image = writer.serialize();
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(image.data()),
                 static_cast<std::streamsize>(image.size() / 2));
      crash("mid_shard");
    }
    writer.write(path);
  }
  barrier(world);  // every shard is on disk

  if (rank == 0) {
    if (crash_requested("after_shards", rank, step)) crash("after_shards");
    nlohmann::json tensors = nlohmann::json::object();
    std::map<int, nlohmann::json> file_sums;
    for (int r = 0; r < W; ++r)
      for (std::size_t i = 0; i < n && !file_sums.count(r); ++i)
        if (writer_of(r, i)) {
          const io::SafetensorsFile f = io::SafetensorsFile::open(dir + "/" + rank_file(r));
          file_sums[r] = nlohmann::json::parse(f.metadata().at("origami.checksums"));
        }
    for (int kind = 0; kind < 3; ++kind)
      for (std::size_t i = 0; i < n; ++i) {
        const std::string name = kKinds[kind] + specs[i].name;
        nlohmann::json blocks = nlohmann::json::array();
        for (int r = 0; r < W; ++r) {
          if (!writer_of(r, i)) continue;
          const Block b = block_at(r, i);
          const std::size_t nd = specs[i].global.size();
          blocks.push_back({{"file", rank_file(r)},
                            {"offset", to_offset(b, nd)},
                            {"shape", to_shape(b, nd)},
                            {"fnv1a64", file_sums.at(r).at(name)}});
        }
        tensors[name] = {{"dtype", "F32"}, {"shape", specs[i].global}, {"blocks", blocks}};
      }
    const nlohmann::json index = {{"format", "origami-checkpoint"},
                                  {"version", 1},
                                  {"step", step},
                                  {"config", nlohmann::json::parse(model_config_to_json(config))},
                                  {"run", run},
                                  {"tensors", tensors}};
    const std::string text = index.dump(1);
    io::write_file_atomically(dir + "/" + kIndex,
                              {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
    if (crash_requested("after_index", rank, step)) crash("after_index");
    const std::string marker = fmt::format("step {}\n", step);
    io::write_file_atomically(dir + "/" + kMarker,
                              {reinterpret_cast<const std::uint8_t*>(marker.data()), marker.size()});
  }
  barrier(world);  // complete before any rank goes on
  return dir;
}

namespace {

// The step-N folders of `save_dir`, newest first.
std::vector<std::pair<std::int64_t, std::string>> step_folders(const std::string& save_dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(save_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step-", 0) != 0) continue;
    char* end = nullptr;
    const long long step = std::strtoll(name.c_str() + 5, &end, 10);
    if (end == nullptr || *end != '\0' || step < 0) continue;
    found.emplace_back(step, e.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

// Whether `dir` holds anything a save writes (so that a missing marker means an interrupted
// save rather than a folder that never was a checkpoint).
bool looks_like_a_checkpoint(const std::string& dir) {
  std::error_code ec;
  // A step-N folder is created empty first: a kill then leaves nothing else in it.
  if (folder_name(dir).rfind("step-", 0) == 0) return true;
  if (fs::exists(fs::path(dir) / kIndex, ec)) return true;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank-", 0) == 0 || name.find(".tmp") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void require_complete(const std::string& dir, const std::string& flag) {
  if (is_complete(dir)) return;
  if (!fs::is_directory(dir))
    throw ConfigError(fmt::format("{} {}: no such checkpoint folder", flag, dir));
  const auto steps = step_folders(dir);
  if (!steps.empty()) {
    std::string newest;
    for (const auto& [step, d] : steps)
      if (newest.empty() && is_complete(d)) newest = d;
    throw ConfigError(fmt::format(
        "{} {}: this folder holds step-N checkpoints (a --save-dir), it is not one; give one of "
        "them{}",
        flag, dir,
        newest.empty() ? std::string(" (none is complete)")
                       : fmt::format(", e.g. the newest complete {}", newest)));
  }
  if (looks_like_a_checkpoint(dir))
    throw ConfigError(fmt::format("{} {}: the checkpoint is incomplete (no {} marker: the run "
                                  "stopped while writing it); give an earlier step-N folder",
                                  flag, dir, kMarker));
  throw ConfigError(fmt::format("{} {}: not a checkpoint (no {}, no {} marker); give a step-N "
                                "folder that `origami train --save-dir` wrote",
                                flag, dir, kIndex, kMarker));
}

std::string find_resume(const CheckpointOptions& o, const Log& log) {
  if (!o.resume.empty()) {
    require_complete(o.resume, "--resume");
    return o.resume;
  }
  if (o.save_dir.empty() || !fs::is_directory(o.save_dir)) return "";
  const auto found = step_folders(o.save_dir);
  for (const auto& [step, dir] : found) {
    if (is_complete(dir)) return dir;
    if (log)
      log(fmt::format("ignoring incomplete checkpoint {} (no {} marker: the run stopped while "
                      "writing it)",
                      dir, kMarker));
  }
  return "";
}

nlohmann::json read_index(const std::string& dir) {
  const std::string path = dir + "/" + kIndex;
  const std::string text = io::read_text_file(path, io::kIndexFileLimit, "checkpoint index");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "origami-checkpoint" ||
      !j.contains("tensors") || !j.contains("config") || !j.contains("step"))
    throw Error(fmt::format("{}: not a valid origami checkpoint index", path));
  return j;
}

namespace {

std::string shape_fields(const ModelConfig& c) {
  return fmt::format(
      "vocab {}, hidden {}, intermediate {}, {} layers, {} heads, {} kv heads, head_dim {}, "
      "{} embeddings",
      c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
      c.num_key_value_heads, c.head_dim(), c.tie_word_embeddings ? "tied" : "untied");
}

void check_same_model(const ModelConfig& saved, const ModelConfig& mine, const std::string& what) {
  if (shape_fields(saved) != shape_fields(mine))
    throw ConfigError(fmt::format("{}: a different model shape ({}) from this run's ({})", what,
                                  shape_fields(saved), shape_fields(mine)));
}

// The step is written in five places (the index, its run state's optimizer steps and schedule
// position, the folder's name, the marker); a resumed run trusts the optimizer steps, so an
// index edited or copied from elsewhere must agree with the rest.
void check_step_agrees(const std::string& dir, const nlohmann::json& index) {
  const std::int64_t step = index.at("step").get<std::int64_t>();
  const nlohmann::json& run = index.at("run");
  auto expect = [&](std::int64_t v, const std::string& what) {
    if (v != step)
      throw Error(fmt::format("{}: the index says step {} but {} is {}; the checkpoint is not "
                              "one that save wrote",
                              dir, step, what, v));
  };
  expect(run.at("optimizer_steps").get<std::int64_t>(), "run.optimizer_steps");
  expect(run.at("lr_schedule").at("step").get<std::int64_t>(), "run.lr_schedule.step");
  const std::int64_t accum = std::max<std::int64_t>(1, run.at("grad_accum").get<std::int64_t>());
  expect(run.at("batches_drawn").get<std::int64_t>() / accum, "run.batches_drawn / grad_accum");
  const std::string name = folder_name(dir);
  long long named = 0;
  char tail = 0;
  if (std::sscanf(name.c_str(), "step-%lld%c", &named, &tail) == 1)
    expect(named, "the folder's name " + name);
  std::ifstream marker(fs::path(dir) / kMarker);
  std::string word;
  long long marked = 0;
  if (marker >> word >> marked && word == "step") expect(marked, std::string("the ") + kMarker + " marker");
}

// Blocks of a Hugging Face folder (model.safetensors or shards with an index): each tensor
// is one block at offset 0 in the file holding it.
nlohmann::json hf_tensors(const std::string& dir) {
  const io::HfWeights weights = io::read_hf_weights(dir);
  nlohmann::json tensors = nlohmann::json::object();
  for (const std::string& file : weights.files) {
    const io::SafetensorsFile f = io::SafetensorsFile::open(dir + "/" + file);
    for (const io::SafetensorsEntry& e : f.tensors())
      tensors[e.name] = {
          {"dtype", std::string(dtype_name(e.dtype))},
          {"shape", e.shape},
          {"blocks", {{{"file", file}, {"offset", Shape(e.shape.size(), 0)}, {"shape", e.shape}}}}};
  }
  return tensors;
}

// Reads the rows/columns of `spec`'s block from every saved block intersecting it.
class BlockReader {
 public:
  // `checksums_required`: an origami checkpoint (every block has one); a Hugging Face folder
  // has none.
  BlockReader(std::string dir, const nlohmann::json& tensors, bool checksums_required)
      : dir_(std::move(dir)), t_(tensors), checksums_required_(checksums_required) {}

  Tensor read(const std::string& name, const parallel::ShardSpec& spec, MemoryTracker& tracker,
              MemCategory category) {
    if (!t_.contains(name))
      throw Error(fmt::format("{}: the checkpoint has no tensor {}", dir_, name));
    const nlohmann::json& info = t_.at(name);
    const Shape global = info.at("shape").get<Shape>();
    if (global != spec.global)
      throw ConfigError(fmt::format("{}: tensor {} has shape [{}], this model needs [{}]", dir_,
                                    name, fmt::join(global, ", "), fmt::join(spec.global, ", ")));
    // A Hugging Face folder's bf16 / fp16 tensors are widened to fp32 on load (exactly);
    // a checkpoint is F32 throughout, as save writes it.
    const std::string dtype = info.at("dtype").get<std::string>();
    if (dtype != "F32" && (checksums_required_ || (dtype != "BF16" && dtype != "F16")))
      throw ConfigError(fmt::format("{}: tensor {} is {}; {} read", dir_, name, dtype,
                                    checksums_required_ ? "only F32 is" : "F32, BF16 and F16 are"));
    Tensor out(tracker, category, spec.local);  // zeroed: padding rows stay zero
    const Block need = block_of(spec);
    const std::int64_t ld = out.ndim() > 1 ? out.dim(1) : 1;
    const std::vector<Block> blocks = saved_blocks(name, info, global);
    std::int64_t covered = 0;
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const Block& b = blocks[k];
      const nlohmann::json& jb = info.at("blocks")[k];
      const std::int64_t r0 = std::max(need.off0, b.off0),
                         r1 = std::min(need.off0 + need.rows, b.off0 + b.rows);
      const std::int64_t c0 = std::max(need.off1, b.off1),
                         c1 = std::min(need.off1 + need.cols, b.off1 + b.cols);
      if (r0 >= r1 || c0 >= c1) continue;
      const std::string file = dir_ + "/" + plain_file_name(name, jb);
      const io::SafetensorsFile& f = open(file);
      const io::SafetensorsEntry& e = f.entry(name);
      if (std::string(dtype_name(e.dtype)) != dtype || e.shape != jb.at("shape").get<Shape>())
        throw Error(fmt::format("{}: tensor {} does not match the index (dtype or shape)", file,
                                name));
      if (jb.contains("fnv1a64")) verify(f, file, name, jb.at("fnv1a64").get<std::string>());
      else if (checksums_required_)
        throw Error(fmt::format("{}: tensor {}: a block in {} has no fnv1a64 checksum (every "
                                "block of a checkpoint has one; the index was edited)",
                                dir_, name, kIndex));
      const Shape ishape =
          global.size() == 1 ? Shape{r1 - r0} : Shape{r1 - r0, c1 - c0};
      const Shape ioff = global.size() == 1 ? Shape{r0 - b.off0} : Shape{r0 - b.off0, c0 - b.off1};
      Tensor part(tracker, MemCategory::Workspace, ishape);
      f.read_block_as_f32(name, ioff, part);
      for (std::int64_t r = r0; r < r1; ++r)
        std::memcpy(out.f32() + (r - need.off0) * ld + (c0 - need.off1),
                    part.f32() + (r - r0) * (c1 - c0),
                    static_cast<std::size_t>(c1 - c0) * sizeof(float));
      covered += (r1 - r0) * (c1 - c0);
    }
    // saved_blocks proved the blocks disjoint, so the count of what they cover is coverage.
    if (covered != need.rows * need.cols)
      throw Error(fmt::format("{}: tensor {}: the saved blocks cover {} of the {} elements this "
                              "rank needs",
                              dir_, name, covered, need.rows * need.cols));
    return out;
  }

 private:
  // The index's blocks of a tensor, each inside the global shape and no two overlapping: a
  // block listed twice would otherwise count twice toward coverage and leave rows unread.
  std::vector<Block> saved_blocks(const std::string& name, const nlohmann::json& info,
                                  const Shape& global) const {
    std::vector<Block> out;
    const std::int64_t rows = global.at(0), cols = global.size() > 1 ? global[1] : 1;
    for (const nlohmann::json& jb : info.at("blocks")) {
      const Shape off = jb.at("offset").get<Shape>(), shp = jb.at("shape").get<Shape>();
      if (off.size() != global.size() || shp.size() != global.size())
        throw Error(fmt::format("{}: tensor {}: a block's rank differs from the tensor's", dir_,
                                name));
      const Block b{off[0], off.size() > 1 ? off[1] : 0, shp[0], shp.size() > 1 ? shp[1] : 1};
      if (b.off0 < 0 || b.off1 < 0 || b.rows < 1 || b.cols < 1 || b.rows > rows - b.off0 ||
          b.cols > cols - b.off1)
        throw Error(fmt::format("{}: tensor {}: a block lies outside the tensor's shape", dir_,
                                name));
      for (const Block& o : out)
        if (b.off0 < o.off0 + o.rows && o.off0 < b.off0 + b.rows && b.off1 < o.off1 + o.cols &&
            o.off1 < b.off1 + b.cols)
          throw Error(fmt::format("{}: tensor {}: two blocks overlap at offset [{}, {}] (a block "
                                  "listed twice?); the index is not one that save writes",
                                  dir_, name, b.off0, b.off1));
      out.push_back(b);
    }
    return out;
  }
  // A block's file is a name inside the checkpoint folder: "../x" or "/etc/x" would read
  // outside it.
  std::string plain_file_name(const std::string& name, const nlohmann::json& jb) const {
    const std::string file = jb.at("file").get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\0') != std::string::npos)
      throw Error(fmt::format("{}: tensor {}: block file '{}' is not a file name inside the "
                              "checkpoint folder",
                              dir_, name, file));
    return file;
  }

  const io::SafetensorsFile& open(const std::string& file) {
    auto it = files_.find(file);
    if (it == files_.end()) {
      if (!fs::is_regular_file(file))
        throw Error(fmt::format("{}: missing checkpoint file", file));
      it = files_.emplace(file, std::make_unique<io::SafetensorsFile>(
                                    io::SafetensorsFile::open(file)))
               .first;
    }
    return *it->second;
  }
  void verify(const io::SafetensorsFile& f, const std::string& file, const std::string& name,
              const std::string& expected) {
    const std::string key = file + "\n" + name;
    if (verified_.count(key)) return;
    const std::span<const std::byte> bytes = f.bytes(name);
    const std::string got = hex(fnv1a64(bytes.data(), bytes.size()));
    if (got != expected)
      throw Error(fmt::format("{}: checksum mismatch in tensor {} (index {}, data {}): the file "
                              "is corrupted",
                              file, name, expected, got));
    verified_.insert({key, true});
  }

  std::string dir_;
  const nlohmann::json& t_;
  bool checksums_required_;
  std::map<std::string, std::unique_ptr<io::SafetensorsFile>> files_;
  std::map<std::string, bool> verified_;
};

}  // namespace

nlohmann::json load(const std::string& dir, const ModelConfig& config, const RankState& st) {
  ORIGAMI_CHECK(st.specs != nullptr && st.params != nullptr, "checkpoint load needs specs and parameters");
  nlohmann::json index;
  nlohmann::json tensors;
  if (fs::is_regular_file(fs::path(dir) / kIndex) || is_complete(dir)) {
    require_complete(dir, "checkpoint");
    index = read_index(dir);
    check_step_agrees(dir, index);
    std::vector<std::string> warnings;
    check_same_model(parse_model_config(index.at("config").dump(), &warnings), config,
                     dir + "/" + kIndex);
    tensors = index.at("tensors");
  } else if (io::has_hf_weights(dir)) {
    if (st.optimizer != nullptr)
      throw ConfigError(fmt::format("{} is a Hugging Face model (no optimizer state): use "
                                    "--init-from, not --resume",
                                    dir));
    const std::string cfg = dir + "/config.json";
    if (!fs::is_regular_file(cfg)) throw Error(fmt::format("{}: missing file", cfg));
    std::vector<std::string> warnings;
    check_same_model(load_model_config(cfg, &warnings), config, cfg);
    // Tied: the embedding is the head; a stored lm_head.weight must be that same table.
    if (config.tie_word_embeddings) {
      const std::string mismatch = io::tied_head_mismatch(dir, io::read_hf_weights(dir));
      if (!mismatch.empty()) throw ConfigError(mismatch);
    }
    tensors = hf_tensors(dir);
  } else {
    throw ConfigError(
        fmt::format("{}: neither a checkpoint ({}) nor a Hugging Face model "
                    "({} or {})",
                    dir, kIndex, io::kHfWeightsFile, io::kHfWeightsIndex));
  }
  BlockReader reader(dir, tensors, !index.is_null());
  const std::vector<parallel::ShardSpec>& specs = *st.specs;
  const int kinds = st.optimizer != nullptr ? 3 : 1;
  std::vector<std::vector<Tensor>> fresh(static_cast<std::size_t>(kinds));
  // A sharded optimizer reads the rank's whole blocks as a transient (Workspace) and keeps
  // its slices of them (AdamW::adopt_moments).
  const bool sliced = st.optimizer != nullptr && st.optimizer->sharded();
  for (int kind = 0; kind < kinds; ++kind) {
    const std::vector<Tensor*> cur = kind_tensors(st, kind);
    ORIGAMI_CHECK(cur.size() == specs.size(), "specs and tensors differ in number");
    for (std::size_t i = 0; i < specs.size(); ++i)
      fresh[static_cast<std::size_t>(kind)].push_back(
          reader.read(kKinds[kind] + specs[i].name, specs[i], *cur[i]->tracker(),
                      kind == 0  ? MemCategory::Parameters
                      : sliced   ? MemCategory::Workspace
                                 : MemCategory::OptimizerState));
  }
  std::int64_t steps = 0;
  if (st.optimizer != nullptr) {
    steps = index.at("run").at("optimizer_steps").get<std::int64_t>();
    if (steps < 0) throw Error(fmt::format("{}: negative optimizer step count", dir));
  }
  // Everything read and verified: swap it in.
  const std::vector<Tensor*> cur = kind_tensors(st, 0);
  for (std::size_t i = 0; i < specs.size(); ++i) std::swap(*cur[i], fresh[0][i]);
  if (st.optimizer != nullptr) {
    st.optimizer->adopt_moments(fresh[1], fresh[2]);
    st.optimizer->restore_steps_taken(steps);
  }
  return index;
}

}  // namespace origami::ckpt
