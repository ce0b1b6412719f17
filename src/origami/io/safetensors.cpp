#include "origami/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "origami/core/error.h"

namespace origami::io {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& label, const std::string& problem) {
  throw Error(fmt::format("safetensors file '{}': {}", label, problem));
}

std::string errno_text() {
  return std::strerror(errno);
}

// JSON text for an error message, cut short: names and values in a hostile header can be
// megabytes long.
std::string cut(const json& v) {
  std::string text = v.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Storage: the whole file, either mapped or owned.

struct SafetensorsFile::Storage {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  void* mapping = nullptr;  // non-null when mmapped
  std::vector<std::uint8_t> owned;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (mapping != nullptr) munmap(mapping, size);
  }
};

SafetensorsFile::SafetensorsFile(std::shared_ptr<const Storage> storage, std::string label)
    : storage_(std::move(storage)), label_(std::move(label)) {
  parse();
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + errno_text());
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    fail(path, "cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  auto storage = std::make_shared<Storage>();
  storage->size = static_cast<std::size_t>(st.st_size);
  if (storage->size > 0) {
    // A private read-only mapping: a sharded load touches only the pages of its blocks.
    void* p = mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      fail(path, "cannot map: " + why);
    }
    storage->mapping = p;
    storage->data = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid
  return SafetensorsFile(std::move(storage), path);
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<std::uint8_t> bytes, std::string label) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  storage->data = storage->owned.data();
  storage->size = storage->owned.size();
  return SafetensorsFile(std::move(storage), std::move(label));
}

// ---------------------------------------------------------------------------------------------
// Header parsing and validation.

void SafetensorsFile::parse() {
  const std::uint8_t* p = storage_->data;
  const std::uint64_t size = storage_->size;
  if (size < 8)
    fail(label_, fmt::format("file is {} bytes, shorter than the 8-byte header length", size));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];  // little-endian, whatever the host
  if (n > size - 8)
    fail(label_, fmt::format("header length {} exceeds the {} bytes that follow it (truncated "
                             "or not a safetensors file)",
                             n, size - 8));
  if (n > kMaxSafetensorsHeader)
    fail(label_,
         fmt::format("header length {} exceeds the limit of {} bytes", n, kMaxSafetensorsHeader));
  if (n < 2 || p[8] != '{')
    fail(label_, "the header does not start with '{' (not a safetensors file)");
  data_offset_ = 8 + n;
  const std::uint64_t data_size = size - data_offset_;

  // Parse with a callback that refuses nesting deeper than a valid header can have
  // ({ name: { shape: [ ] } }) and duplicate tensor names, before either can cost anything.
  std::set<std::string> seen;
  const auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= 3)
      fail(label_, "header JSON nested deeper than a safetensors header can be");
    if (event == json::parse_event_t::key && depth == 1 &&
        !seen.insert(parsed.get<std::string>()).second)
      fail(label_, fmt::format("tensor name {} appears twice in the header", cut(parsed)));
    return true;
  };
  json header;
  try {
    const char* begin = reinterpret_cast<const char*>(p + 8);
    header = json::parse(begin, begin + n, guard);
  } catch (const json::exception& e) {
    fail(label_, fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) fail(label_, "header is not a JSON object");

  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(label_, "__metadata__ is not an object of strings");
      for (auto& [key, value] : info.items()) {
        if (!value.is_string())
          fail(label_, fmt::format("__metadata__ value of {} is not a string", cut(json(key))));
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string quoted = cut(json(name));
    if (name.empty()) fail(label_, "a tensor has an empty name");
    if (!info.is_object()) fail(label_, fmt::format("entry {} is not an object", quoted));
    for (auto& [key, unused] : info.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        fail(label_, fmt::format("entry {} has an unknown field {}", quoted, cut(json(key))));
    SafetensorsEntry e;
    e.name = name;

    const auto dt = info.find("dtype");
    if (dt == info.end() || !dt->is_string())
      fail(label_, fmt::format("entry {} has no dtype string", quoted));
    if (!parse_dtype(dt->get<std::string>(), &e.dtype))
      fail(label_, fmt::format("entry {} has dtype {}, which Origami does not read (it reads "
                               "F32, BF16, F16, F64, I32, I64)",
                               quoted, cut(*dt)));

    const auto sh = info.find("shape");
    if (sh == info.end() || !sh->is_array())
      fail(label_, fmt::format("entry {} has no shape array", quoted));
    const std::uint64_t elem = dtype_size(e.dtype);
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned())
        fail(label_, fmt::format("entry {} has a shape element {} that is not a non-negative "
                                 "integer",
                                 quoted, cut(d)));
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(label_, fmt::format("entry {} has dimension {} that is too large", quoted, v));
      e.shape.push_back(static_cast<std::int64_t>(v));
    }
    // The product is bounded by the data section as it grows, so it cannot overflow.
    std::uint64_t numel = 1;
    if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) {
      numel = 0;
    } else {
      for (const std::int64_t v : e.shape) {
        if (static_cast<std::uint64_t>(v) > data_size / elem / numel)
          fail(label_, fmt::format("entry {} has shape {}, larger than the data section "
                                   "of {} bytes (truncated file?)",
                                   quoted, cut(*sh), data_size));
        numel *= static_cast<std::uint64_t>(v);
      }
    }
    e.numel = static_cast<std::int64_t>(numel);

    const auto off = info.find("data_offsets");
    if (off == info.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      fail(label_, fmt::format("entry {} needs data_offsets [begin, end] of non-negative "
                               "integers",
                               quoted));
    e.begin = (*off)[0].get<std::uint64_t>();
    e.end = (*off)[1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      fail(label_, fmt::format("entry {} has data_offsets [{}, {}] outside the data section of "
                               "{} bytes (truncated file?)",
                               quoted, e.begin, e.end, data_size));
    if (e.end - e.begin != numel * elem)
      fail(label_,
           fmt::format("entry {} has {} bytes but shape {} of {} needs {}", quoted, e.end - e.begin,
                       shape_str(e.shape), dtype_name(e.dtype), numel * elem));
    entries_.push_back(std::move(e));
  }

  // The tensors must tile the data section exactly: sorted by offset, each begins where the
  // previous ended, and the last ends at the end of the file.
  std::stable_sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const auto& e : entries_) {
    if (e.begin != expected)
      fail(label_, fmt::format("tensor {} starts at byte {} of the data section, expected {} "
                               "(overlapping or gapped data_offsets)",
                               cut(json(e.name)), e.begin, expected));
    expected = e.end;
  }
  if (expected != data_size)
    fail(label_, fmt::format("the tensors cover {} bytes but the data section has {} (extra "
                             "bytes after the last tensor)",
                             expected, data_size));
  for (std::size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
}

const std::byte* SafetensorsFile::data_section() const {
  return reinterpret_cast<const std::byte*>(storage_->data) + data_offset_;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail(label_, fmt::format("no tensor named '{}'", name));
  return entries_[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  return {data_section() + e.begin, static_cast<std::size_t>(e.end - e.begin)};
}

Tensor SafetensorsFile::read(const std::string& name, MemoryTracker& tracker,
                             MemCategory category) const {
  const SafetensorsEntry& e = entry(name);
  Tensor t(tracker, category, e.dtype, e.shape);
  read_into(name, t);
  return t;
}

void SafetensorsFile::read_into(const std::string& name, Tensor& dst) const {
  const SafetensorsEntry& e = entry(name);
  if (dst.dtype() != e.dtype || dst.shape() != e.shape)
    fail(label_,
         fmt::format("tensor '{}' is {} {} but the destination is {} {}", name, dtype_name(e.dtype),
                     shape_str(e.shape), dtype_name(dst.dtype()), shape_str(dst.shape())));
  if (dst.raw() != nullptr && e.end > e.begin)
    std::memcpy(dst.raw(), data_section() + e.begin, static_cast<std::size_t>(e.end - e.begin));
}

void SafetensorsFile::read_block(const std::string& name, const Shape& offsets, Tensor& dst) const {
  const SafetensorsEntry& e = entry(name);
  const std::size_t rank = e.shape.size();
  if (dst.dtype() != e.dtype)
    fail(label_, fmt::format("tensor '{}' is {} but the destination is {}", name,
                             dtype_name(e.dtype), dtype_name(dst.dtype())));
  if (static_cast<std::size_t>(dst.ndim()) != rank || offsets.size() != rank)
    fail(label_, fmt::format("block {} at offsets {} does not have the rank of tensor '{}' {}",
                             shape_str(dst.shape()), shape_str(offsets), name, shape_str(e.shape)));
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t o = offsets[i], b = dst.shape()[i];
    if (o < 0 || o > e.shape[i] || b > e.shape[i] - o)
      fail(label_,
           fmt::format("block {} at offsets {} does not fit in tensor '{}' {}",
                       shape_str(dst.shape()), shape_str(offsets), name, shape_str(e.shape)));
  }
  if (dst.numel() == 0 || dst.raw() == nullptr) return;
  const std::size_t elem = dtype_size(e.dtype);
  if (rank == 0) {
    std::memcpy(dst.raw(), data_section() + e.begin, elem);
    return;
  }
  // Row-major strides of the stored tensor; copy one contiguous run of the last dimension
  // per block row, stepping an odometer over the other dimensions.
  std::vector<std::int64_t> stride(rank, 1);
  for (std::size_t i = rank - 1; i > 0; --i) stride[i - 1] = stride[i] * e.shape[i];
  const std::size_t run = static_cast<std::size_t>(dst.shape()[rank - 1]) * elem;
  const std::int64_t rows = dst.numel() / dst.shape()[rank - 1];
  std::vector<std::int64_t> idx(rank, 0);
  auto* out = static_cast<std::byte*>(dst.raw());
  const std::byte* src = data_section() + e.begin;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t g = 0;
    for (std::size_t i = 0; i < rank; ++i) g += (offsets[i] + idx[i]) * stride[i];
    std::memcpy(out + static_cast<std::size_t>(r) * run, src + static_cast<std::size_t>(g) * elem,
                run);
    for (std::size_t i = rank - 1; i-- > 0;) {  // odometer over all but the last dimension
      if (++idx[i] < dst.shape()[i]) break;
      idx[i] = 0;
    }
  }
}

float bf16_to_f32(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;  // the top half of an fp32
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {  // infinity or NaN, the payload kept
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: mantissa x 2^-24, normal in fp32
    int shift = 0;
    std::uint32_t m = mantissa;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      ++shift;
    }
    bits = sign | ((113u - static_cast<std::uint32_t>(shift)) << 23) | ((m & 0x3ffu) << 13);
  } else {
    bits = sign;  // +-0
  }
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

void SafetensorsFile::read_block_as_f32(const std::string& name, const Shape& offsets,
                                        Tensor& dst) const {
  const SafetensorsEntry& e = entry(name);
  if (dst.dtype() != DType::F32)
    fail(label_, fmt::format("tensor '{}': read_block_as_f32 needs an F32 destination, got {}",
                             name, dtype_name(dst.dtype())));
  if (e.dtype == DType::F32) return read_block(name, offsets, dst);
  if (e.dtype != DType::BF16 && e.dtype != DType::F16)
    fail(label_, fmt::format("tensor '{}' is {}; parameters are read from F32, BF16 or F16 "
                             "(convert the file)",
                             name, dtype_name(e.dtype)));
  // The same block, read in the stored dtype, then widened element by element.
  Tensor half(*dst.tracker(), MemCategory::Workspace, e.dtype, dst.shape());
  read_block(name, offsets, half);
  if (half.numel() == 0) return;
  const auto* in = static_cast<const std::uint16_t*>(half.raw());
  float* out = dst.f32();
  const bool bf16 = e.dtype == DType::BF16;
  for (std::int64_t i = 0; i < half.numel(); ++i)
    out[i] = bf16 ? bf16_to_f32(in[i]) : f16_to_f32(in[i]);
}

std::vector<double> SafetensorsFile::read_as_f64(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const std::byte* src = data_section() + e.begin;
  std::vector<double> out(static_cast<std::size_t>(e.numel));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::byte* s = src + i * dtype_size(e.dtype);
    switch (e.dtype) {
      case DType::F32: {
        float v;
        std::memcpy(&v, s, 4);
        out[i] = v;
        break;
      }
      case DType::F64: {
        double v;
        std::memcpy(&v, s, 8);
        out[i] = v;
        break;
      }
      case DType::I32: {
        std::int32_t v;
        std::memcpy(&v, s, 4);
        out[i] = v;
        break;
      }
      case DType::I64: {
        std::int64_t v;
        std::memcpy(&v, s, 8);
        out[i] = static_cast<double>(v);
        break;
      }
      case DType::BF16:
      case DType::F16: {
        std::uint16_t h;
        std::memcpy(&h, s, 2);
        out[i] = e.dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
        break;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing.

void SafetensorsWriter::add(std::string name, DType dtype, Shape shape, const void* data) {
  ORIGAMI_CHECK(!name.empty() && name != "__metadata__",
                "safetensors writer: invalid tensor name '{}'", name);
  for (const auto& it : items_)
    ORIGAMI_CHECK(it.name != name, "safetensors writer: tensor '{}' added twice", name);
  const std::int64_t numel = shape_numel(shape);  // refuses negative dimensions
  const std::uint64_t bytes = static_cast<std::uint64_t>(numel) * dtype_size(dtype);
  ORIGAMI_CHECK(bytes == 0 || data != nullptr, "safetensors writer: tensor '{}' has no data", name);
  items_.push_back({std::move(name), dtype, std::move(shape), bytes, data});
}

void SafetensorsWriter::add(std::string name, const Tensor& tensor) {
  ORIGAMI_CHECK(tensor.defined() && tensor.backed(),
                "safetensors writer: tensor '{}' holds no memory", name);
  add(std::move(name), tensor.dtype(), tensor.shape(), tensor.raw());
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

namespace {

// The 8-byte length and the JSON header, padded with spaces to a multiple of 8 bytes so that
// the data section starts aligned (as the reference writer does).
template <class Items>
std::string make_header(const Items& items, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& it : items) {
    h[it.name] = {{"dtype", dtype_name(it.dtype)},
                  {"shape", it.shape},
                  {"data_offsets", {offset, offset + it.bytes}}};
    offset += it.bytes;
  }
  std::string text = h.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

void write_all(int fd, const void* data, std::size_t n, const std::string& path) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(fmt::format("cannot write '{}': {}", path, errno_text()));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Writes through `body` into a temporary file next to `path`, then renames it into place.
void atomic_write(const std::string& path, const std::function<void(int fd)>& body) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot create '{}': {}", tmp, errno_text()));
  try {
    body(fd);
    if (::fsync(fd) != 0) throw Error(fmt::format("cannot fsync '{}': {}", tmp, errno_text()));
    if (::close(fd) != 0) {
      ::unlink(tmp.c_str());
      throw Error(fmt::format("cannot close '{}': {}", tmp, errno_text()));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, why));
  }
  // Make the rename itself durable.
  const std::size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

std::vector<std::uint8_t> SafetensorsWriter::serialize() const {
  const std::string header = make_header(items_, metadata_);
  std::vector<std::uint8_t> out(header.begin(), header.end());
  for (const auto& it : items_) {
    const auto* p = static_cast<const std::uint8_t*>(it.data);
    if (it.bytes > 0) out.insert(out.end(), p, p + it.bytes);
  }
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  const std::string header = make_header(items_, metadata_);
  // Streamed tensor by tensor: a checkpoint is never copied whole in memory.
  atomic_write(path, [&](int fd) {
    write_all(fd, header.data(), header.size(), path);
    for (const auto& it : items_)
      if (it.bytes > 0) write_all(fd, it.data, static_cast<std::size_t>(it.bytes), path);
  });
}

void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
  atomic_write(path, [&](int fd) { write_all(fd, bytes.data(), bytes.size(), path); });
}

}  // namespace origami::io
