// safetensors reader/writer: round trips, block reads against a naive index computation, and
// corrupted inputs that must each give an origami::Error naming the problem (never a crash).
#include <dirent.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/io/safetensors.h"

namespace origami::io {
namespace {

using ::testing::HasSubstr;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(gen());
  return v;
}

// A file image from a raw header text and a data section.
std::vector<std::uint8_t> make_image(const std::string& header, std::size_t data_bytes) {
  // Sized once and filled with memcpy (GCC 12 misreports vector::insert on small vectors).
  const std::uint64_t n = header.size();
  std::vector<std::uint8_t> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  const auto data = random_bytes(data_bytes, 7);
  if (data_bytes > 0) std::memcpy(out.data() + 8 + header.size(), data.data(), data_bytes);
  return out;
}

// Expects from_bytes(image) to throw origami::Error containing `part`.
void expect_invalid(const std::vector<std::uint8_t>& image, const std::string& part) {
  try {
    SafetensorsFile::from_bytes(image, "bad.safetensors");
    FAIL() << "accepted; expected an error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.safetensors")) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(part));
  }
}
void expect_invalid_header(const std::string& header, std::size_t data_bytes,
                           const std::string& part) {
  SCOPED_TRACE(header);
  expect_invalid(make_image(header, data_bytes), part);
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  struct Case {
    std::string name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"a.f32", DType::F32, {3, 5}},    {"b.bf16", DType::BF16, {7}},
      {"c.f64", DType::F64, {2, 3, 4}}, {"d.i32", DType::I32, {1, 1}},
      {"e.i64", DType::I64, {5}},       {"scalar", DType::F64, {}},
      {"empty", DType::F32, {0}},       {"empty2", DType::I32, {4, 0, 3}},
      {"one", DType::BF16, {1}}};
  std::vector<std::vector<std::uint8_t>> data;
  SafetensorsWriter w;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    data.push_back(
        random_bytes(static_cast<std::size_t>(shape_numel(c.shape)) * dtype_size(c.dtype),
                     static_cast<std::uint32_t>(100 + i)));
    w.add(c.name, c.dtype, c.shape, data.back().data());
  }
  w.set_metadata("format", "pt");
  w.set_metadata("note", "quotes \" and unicode \xc3\xa9");

  const std::string dir = fresh_dir("origami_st_roundtrip");
  const std::string path = dir + "/model.safetensors";
  w.write(path);
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"model.safetensors"});  // no temp left

  for (int source = 0; source < 2; ++source) {
    const SafetensorsFile f =
        source == 0 ? SafetensorsFile::open(path) : SafetensorsFile::from_bytes(w.serialize());
    ASSERT_EQ(f.tensors().size(), cases.size());
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.metadata().at("note"), "quotes \" and unicode \xc3\xa9");
    MemoryTracker tracker;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      SCOPED_TRACE(c.name);
      const SafetensorsEntry& e = f.entry(c.name);
      EXPECT_EQ(e.dtype, c.dtype);
      EXPECT_EQ(e.shape, c.shape);
      EXPECT_EQ(e.numel, shape_numel(c.shape));
      Tensor t = f.read(c.name, tracker, MemCategory::Parameters);
      EXPECT_EQ(t.dtype(), c.dtype);
      EXPECT_EQ(t.shape(), c.shape);
      ASSERT_EQ(static_cast<std::size_t>(t.bytes()), data[i].size());
      if (!data[i].empty()) {
        EXPECT_EQ(std::memcmp(t.raw(), data[i].data(), data[i].size()), 0);
      }
      EXPECT_EQ(f.bytes(c.name).size(), data[i].size());
    }
  }
  // The data section starts 8-byte aligned (header padded with spaces).
  const auto image = w.serialize();
  std::uint64_t n = 0;
  std::memcpy(&n, image.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(Safetensors, ReadsValuesAsDouble) {
  const float f32[3] = {1.5f, -2.25f, 3e-8f};
  const double f64[2] = {1.0 / 3.0, -7e100};
  const std::int32_t i32[2] = {-100, 2147483647};
  const std::int64_t i64[1] = {-(1LL << 40)};
  const std::uint16_t bf16[3] = {0x3F80, 0xC040, 0x0000};  // 1.0, -3.0, 0.0
  SafetensorsWriter w;
  w.add("f32", DType::F32, {3}, f32);
  w.add("f64", DType::F64, {2}, f64);
  w.add("i32", DType::I32, {2}, i32);
  w.add("i64", DType::I64, {1}, i64);
  w.add("bf16", DType::BF16, {3}, bf16);
  const auto f = SafetensorsFile::from_bytes(w.serialize());
  EXPECT_EQ(f.read_as_f64("f32"), (std::vector<double>{1.5, -2.25, static_cast<double>(3e-8f)}));
  EXPECT_EQ(f.read_as_f64("f64"), (std::vector<double>{1.0 / 3.0, -7e100}));
  EXPECT_EQ(f.read_as_f64("i32"), (std::vector<double>{-100, 2147483647}));
  EXPECT_EQ(f.read_as_f64("i64"), (std::vector<double>{-1099511627776.0}));
  EXPECT_EQ(f.read_as_f64("bf16"), (std::vector<double>{1.0, -3.0, 0.0}));
}

// The value of a bf16 or fp16 bit pattern from its fields, in float64: the reference the
// widening is held to. NaN is returned as NaN (its payload is checked on the bits).
double half_value(std::uint16_t bits, int exponent_bits) {
  const int mantissa_bits = 15 - exponent_bits;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int e = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const double m = bits & ((1 << mantissa_bits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exponent_bits) - 1)
    return m == 0 ? sign * std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mantissa_bits);  // subnormal (or zero)
  return sign * std::ldexp(1.0 + std::ldexp(m, -mantissa_bits), e - bias);
}

// Every one of the 65536 bf16 and fp16 bit patterns, read as a block into fp32: each value
// exactly its float64 reference (subnormals, both zeros, infinities), NaNs NaN with their
// payload kept; a sub-block at odd offsets reads the same elements.
TEST(Safetensors, HalfPrecisionWidensToF32ExactlyForEveryBitPattern) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  SafetensorsWriter w;
  w.add("bf16", DType::BF16, {256, 256}, all.data());
  w.add("f16", DType::F16, {256, 256}, all.data());
  const auto f = SafetensorsFile::from_bytes(w.serialize());
  MemoryTracker tracker;
  for (const auto& [name, exponent_bits] : {std::pair{"bf16", 8}, std::pair{"f16", 5}}) {
    Tensor out(tracker, MemCategory::Workspace, {256, 256});
    f.read_block_as_f32(name, {0, 0}, out);
    int nans = 0, subnormals = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const float got = out.f32()[i];
      const double want = half_value(all[i], exponent_bits);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << name << " " << i;
        std::uint32_t bits;
        std::memcpy(&bits, &got, 4);
        const int shift = exponent_bits == 8 ? 16 : 13;  // the payload's place in fp32
        const std::uint32_t payload = all[i] & ((1u << (15 - exponent_bits)) - 1);
        EXPECT_EQ(bits & 0x7fffffu, payload << shift) << i;
        EXPECT_EQ(bits >> 31, static_cast<std::uint32_t>(all[i] >> 15)) << i;
        ++nans;
        continue;
      }
      ASSERT_EQ(static_cast<double>(got), want) << name << " bits " << i;
      ASSERT_EQ(std::signbit(got), (all[i] & 0x8000) != 0) << name << " bits " << i;
      if (want != 0 && std::abs(want) < std::ldexp(1.0, exponent_bits == 8 ? -126 : -14))
        ++subnormals;
    }
    EXPECT_EQ(nans, 2 * ((1 << (15 - exponent_bits)) - 1)) << name;
    EXPECT_EQ(subnormals, 2 * ((1 << (15 - exponent_bits)) - 1)) << name;
    // The read_as_f64 path agrees, and so does a block at odd offsets.
    const std::vector<double> d = f.read_as_f64(name);
    Tensor part(tracker, MemCategory::Workspace, {250, 247});
    f.read_block_as_f32(name, {3, 5}, part);
    for (std::int64_t r = 0; r < 250; ++r)
      for (std::int64_t c = 0; c < 247; ++c) {
        const std::size_t i = static_cast<std::size_t>((r + 3) * 256 + c + 5);
        const float got = part.f32()[r * 247 + c];
        ASSERT_TRUE(std::isnan(d[i]) ? std::isnan(got) : static_cast<double>(got) == d[i]) << i;
        ASSERT_TRUE(std::isnan(got) || got == out.f32()[i]) << i;
      }
  }
  // Not a float type, or not an F32 destination: refused naming the tensor.
  const std::int32_t ints[2] = {1, 2};
  SafetensorsWriter wi;
  wi.add("ints", DType::I32, {2}, ints);
  const auto fi = SafetensorsFile::from_bytes(wi.serialize(), "ints.safetensors");
  Tensor two(tracker, MemCategory::Workspace, {2});
  try {
    fi.read_block_as_f32("ints", {0}, two);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'ints' is I32"));
    EXPECT_THAT(e.what(), HasSubstr("ints.safetensors"));
  }
  Tensor wrong(tracker, MemCategory::Workspace, DType::F64, {256, 256});
  EXPECT_THROW(f.read_block_as_f32("f16", {0, 0}, wrong), Error);
}

TEST(Safetensors, BlockReadsMatchNaiveIndexing) {
  // A rank-3 F32 tensor of odd sizes whose element at (i, j, k) encodes its own index.
  const Shape shape = {5, 7, 3};
  std::vector<float> full(5 * 7 * 3);
  for (std::size_t e = 0; e < full.size(); ++e) full[e] = static_cast<float>(e) + 0.5f;
  const std::vector<std::int64_t> mat = {1, 2, 3, 4, 5, 6};  // I64 [2, 3]
  SafetensorsWriter w;
  w.add("x", DType::F32, shape, full.data());
  w.add("m", DType::I64, {2, 3}, mat.data());
  const auto f = SafetensorsFile::from_bytes(w.serialize(), "blocks");
  MemoryTracker tracker;
  std::mt19937 gen(3);
  for (int trial = 0; trial < 200; ++trial) {
    Shape off(3), blk(3);
    for (int d = 0; d < 3; ++d) {
      off[d] = std::uniform_int_distribution<std::int64_t>(0, shape[d])(gen);
      blk[d] = std::uniform_int_distribution<std::int64_t>(0, shape[d] - off[d])(gen);
    }
    Tensor t(tracker, MemCategory::Parameters, DType::F32, blk);
    f.read_block("x", off, t);
    for (std::int64_t i = 0; i < blk[0]; ++i)
      for (std::int64_t j = 0; j < blk[1]; ++j)
        for (std::int64_t k = 0; k < blk[2]; ++k) {
          const std::int64_t g = ((off[0] + i) * 7 + (off[1] + j)) * 3 + (off[2] + k);
          ASSERT_EQ(t.f32()[(i * blk[1] + j) * blk[2] + k], full[static_cast<std::size_t>(g)])
              << shape_str(off) << " " << shape_str(blk);
        }
  }
  // A column shard of a matrix (what a TSP rank loads), and the whole tensor as one block.
  Tensor col(tracker, MemCategory::Parameters, DType::I64, {2, 1});
  f.read_block("m", {0, 2}, col);
  EXPECT_EQ(col.data<std::int64_t>()[0], 3);
  EXPECT_EQ(col.data<std::int64_t>()[1], 6);
  Tensor whole(tracker, MemCategory::Parameters, DType::I64, {2, 3});
  f.read_block("m", {0, 0}, whole);
  EXPECT_EQ(std::memcmp(whole.raw(), mat.data(), 48), 0);

  // Refusals: block past the end, negative offset, wrong rank, wrong dtype, unknown name.
  Tensor b(tracker, MemCategory::Parameters, DType::F32, {2, 2, 2});
  EXPECT_THROW(f.read_block("x", {4, 0, 0}, b), Error);
  EXPECT_THROW(f.read_block("x", {0, 0, 2}, b), Error);
  EXPECT_THROW(f.read_block("x", {-1, 0, 0}, b), Error);
  EXPECT_THROW(f.read_block("x", {0, 0}, b), Error);
  Tensor wrong_rank(tracker, MemCategory::Parameters, DType::F32, {2, 2});
  EXPECT_THROW(f.read_block("x", {0, 0}, wrong_rank), Error);
  Tensor wrong_type(tracker, MemCategory::Parameters, DType::F64, {2, 2, 2});
  EXPECT_THROW(f.read_block("x", {0, 0, 0}, wrong_type), Error);
  try {
    f.read_block("nope", {0, 0, 0}, b);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no tensor named 'nope'"));
    EXPECT_THAT(e.what(), HasSubstr("blocks"));
  }
}

TEST(Safetensors, ReadIntoChecksDtypeAndShape) {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  SafetensorsWriter w;
  w.add("w", DType::F32, {2, 3}, v);
  const auto f = SafetensorsFile::from_bytes(w.serialize());
  MemoryTracker tracker;
  Tensor ok(tracker, MemCategory::Parameters, DType::F32, {2, 3});
  f.read_into("w", ok);
  EXPECT_EQ(ok.f32()[5], 6.0f);
  Tensor bad_shape(tracker, MemCategory::Parameters, DType::F32, {3, 2});
  EXPECT_THROW(f.read_into("w", bad_shape), Error);
  Tensor bad_type(tracker, MemCategory::Parameters, DType::BF16, {2, 3});
  try {
    f.read_into("w", bad_type);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("F32 [2, 3]"));
    EXPECT_THAT(e.what(), HasSubstr("BF16 [2, 3]"));
  }
}

TEST(Safetensors, WriterRefusesBadEntries) {
  const float v[2] = {1, 2};
  SafetensorsWriter w;
  w.add("a", DType::F32, {2}, v);
  EXPECT_THROW(w.add("a", DType::F32, {2}, v), Error);
  EXPECT_THROW(w.add("", DType::F32, {2}, v), Error);
  EXPECT_THROW(w.add("__metadata__", DType::F32, {2}, v), Error);
  EXPECT_THROW(w.add("n", DType::F32, {-2}, v), Error);
  EXPECT_THROW(w.add("null", DType::F32, {2}, nullptr), Error);
  EXPECT_NO_THROW(w.add("zero", DType::F32, {0}, nullptr));
}

TEST(Safetensors, AtomicWriteReplacesAndFailsCleanly) {
  const std::string dir = fresh_dir("origami_st_atomic");
  const std::string path = dir + "/x.safetensors";
  const float a[1] = {1}, b[2] = {2, 3};
  SafetensorsWriter w1, w2;
  w1.add("t", DType::F32, {1}, a);
  w2.add("t", DType::F32, {2}, b);
  w1.write(path);
  w2.write(path);  // replaces
  EXPECT_EQ(SafetensorsFile::open(path).entry("t").shape, Shape{2});
  EXPECT_EQ(files_in(dir).size(), 1u);
  // Into a folder that does not exist: an error naming the path; nothing created.
  try {
    w1.write(dir + "/missing/x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing/x.safetensors"));
  }
  EXPECT_EQ(files_in(dir).size(), 1u);
  // Opening a missing file, a folder.
  EXPECT_THROW(SafetensorsFile::open(dir + "/nope.safetensors"), Error);
  EXPECT_THROW(SafetensorsFile::open(dir), Error);
  // An empty file.
  { std::ofstream(dir + "/empty.safetensors"); }
  try {
    SafetensorsFile::open(dir + "/empty.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("empty.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr("0 bytes"));
  }
}

TEST(Safetensors, RefusesCorruptedHeaders) {
  const std::string t = R"("dtype":"F32","shape":[2],"data_offsets":)";
  // Sanity: the template itself is valid.
  EXPECT_NO_THROW(SafetensorsFile::from_bytes(make_image("{\"a\":{" + t + "[0,8]}}", 8)));
  expect_invalid({1, 2, 3}, "shorter than the 8-byte header length");
  expect_invalid({}, "0 bytes");
  {
    auto img = make_image("{\"a\":{" + t + "[0,8]}}", 8);
    img[7] = 0x80;  // header length 2^63 + ...
    expect_invalid(img, "header length");
    img[7] = 0;
    img[0] = static_cast<std::uint8_t>(img[0] + 100);  // longer than the file
    expect_invalid(img, "exceeds");
  }
  expect_invalid_header("", 0, "does not start with '{'");
  expect_invalid_header("[1,2]", 0, "does not start with '{'");
  expect_invalid_header("{\"a\":", 0, "not valid JSON");
  expect_invalid_header("{\"a\":{" + t + "[0,8]}} x", 8, "not valid JSON");
  expect_invalid_header("{\"a\":\xff}", 0, "not valid JSON");
  expect_invalid_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,8]}}", 8,
                        "not valid JSON");  // a number beyond double: out_of_range in nlohmann
  expect_invalid_header("{\"a\":[[[[[[[[[[1]]]]]]]]]]}", 0, "nested deeper");
  expect_invalid_header("{\"a\":{\"shape\":[[2]],\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8,
                        "nested deeper");
  expect_invalid_header("{\"a\":{" + t + "[0,8]},\"a\":{" + t + "[8,16]}}", 16, "appears twice");
  expect_invalid_header("{\"a\":3}", 0, "not an object");
  expect_invalid_header("{\"\":{" + t + "[0,8]}}", 8, "empty name");
  expect_invalid_header("{\"__metadata__\":{\"k\":1}}", 0, "not a string");
  expect_invalid_header("{\"__metadata__\":[\"k\"]}", 0, "__metadata__");
  expect_invalid_header("{\"a\":{" + t + "[0,8],\"extra\":1}}", 8, "unknown field");
  expect_invalid_header("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "no dtype");
  expect_invalid_header("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                        "does not read");
  expect_invalid_header("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
  expect_invalid_header("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "no shape");
  expect_invalid_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
                        "non-negative");
  expect_invalid_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
                        "non-negative");
  expect_invalid_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
                        "non-negative");
  // Shapes whose product overflows 64 bits, or only the data section.
  expect_invalid_header(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
      "\"data_offsets\":[0,8]}}",
      8, "larger than the data section");
  expect_invalid_header(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551615],"
      "\"data_offsets\":[0,8]}}",
      8, "too large");
  expect_invalid_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets");
  expect_invalid_header("{\"a\":{" + t + "[0]}}", 8, "data_offsets");
  expect_invalid_header("{\"a\":{" + t + "[0,8,16]}}", 8, "data_offsets");
  expect_invalid_header("{\"a\":{" + t + "[-1,7]}}", 8, "data_offsets");
  expect_invalid_header("{\"a\":{" + t + "[8,0]}}", 8, "outside the data section");
  expect_invalid_header("{\"a\":{" + t + "[0,8]}}", 7, "truncated");     // truncated
  expect_invalid_header("{\"a\":{" + t + "[0,12]}}", 12, "needs 8");     // size
  expect_invalid_header("{\"a\":{" + t + "[0,8]}}", 9, "extra bytes");   // trailing
  expect_invalid_header("{\"a\":{" + t + "[8,16]}}", 16, "expected 0");  // hole
  expect_invalid_header("{\"a\":{" + t + "[0,8]},\"b\":{" + t + "[4,12]}}", 12,
                        "overlapping");  // overlap
  expect_invalid_header("{\"a\":{" + t + "[0,8]},\"b\":{" + t + "[0,8]}}", 8, "overlapping");
  // A zero-size tensor may sit anywhere on a boundary, not inside another tensor.
  EXPECT_NO_THROW(SafetensorsFile::from_bytes(make_image(
      "{\"a\":{" + t + "[0,8]},\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
      8)));
  expect_invalid_header(
      "{\"a\":{" + t + "[0,8]},\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", 8,
      "overlapping");
}

// Every prefix of a valid file, and random byte corruptions of it, either parse or throw
// origami::Error: no other exception and no crash (ASan/UBSan run this too).
TEST(Safetensors, TruncationsAndRandomCorruptionsNeverCrash) {
  const float f[6] = {1, 2, 3, 4, 5, 6};
  const double d[2] = {1, 2};
  SafetensorsWriter w;
  w.add("model.layers.0.weight", DType::F32, {2, 3}, f);
  w.add("b", DType::F64, {2}, d);
  w.set_metadata("format", "pt");
  const auto image = w.serialize();
  for (std::size_t len = 0; len < image.size(); ++len) {
    const std::vector<std::uint8_t> prefix(image.begin(),
                                           image.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(SafetensorsFile::from_bytes(prefix), Error) << "prefix of " << len << " bytes";
  }
  std::mt19937 gen(11);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto img = image;
    const int flips = 1 + static_cast<int>(gen() % 4);
    for (int k = 0; k < flips; ++k) img[gen() % img.size()] = static_cast<std::uint8_t>(gen());
    try {
      const auto file = SafetensorsFile::from_bytes(img);
      for (const auto& e : file.tensors()) (void)file.read_as_f64(e.name);
      ++accepted;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "non-origami exception: " << e.what();
    }
  }
  // Flips in the data section are accepted: the format has no checksum.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace origami::io
