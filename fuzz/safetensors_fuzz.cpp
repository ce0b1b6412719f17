// libFuzzer target for the safetensors reader: any byte string must either parse or throw
// origami::Error; a crash, a sanitizer report or any other exception is a bug. Parsed files
// are also read back whole, as doubles and as one block (also widened to fp32), so the
// offsets the parser accepted are exercised against the buffer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "origami/core/error.h"
#include "origami/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using origami::io::SafetensorsFile;
  try {
    const SafetensorsFile file =
        SafetensorsFile::from_bytes(std::vector<std::uint8_t>(data, data + size), "fuzz");
    origami::MemoryTracker tracker;
    for (const auto& e : file.tensors()) {
      if (e.numel > (1 << 16)) continue;  // keep each input cheap
      (void)file.read_as_f64(e.name);
      origami::Tensor whole = file.read(e.name, tracker, origami::MemCategory::Workspace);
      // The trailing half of every dimension as one block.
      origami::Shape offsets, block;
      for (std::int64_t d : e.shape) {
        offsets.push_back(d / 2);
        block.push_back(d - d / 2);
      }
      origami::Tensor part(tracker, origami::MemCategory::Workspace, e.dtype, block);
      file.read_block(e.name, offsets, part);
      // The same block widened to fp32, as parameters load (F32, BF16, F16).
      if (e.dtype == origami::DType::F32 || e.dtype == origami::DType::BF16 ||
          e.dtype == origami::DType::F16) {
        origami::Tensor wide(tracker, origami::MemCategory::Workspace, block);
        file.read_block_as_f32(e.name, offsets, wide);
      }
    }
  } catch (const origami::Error&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
