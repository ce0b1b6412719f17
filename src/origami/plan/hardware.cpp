#include "origami/plan/hardware.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::plan {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// A typical inter-node fabric: one 400 Gb/s InfiniBand NDR / RoCE NIC per device (50 GB/s),
// ~90% of it reached by large transfers; ~10 us per message across the switch.
Link fabric_400g() { return {10e-6, 45e9}; }

Hardware gpu(std::string name, std::string description, double memory, double fp32,
             double bf16, double memory_bw, Link intra, std::string sources) {
  Hardware h;
  h.name = std::move(name);
  h.description = std::move(description);
  h.memory_bytes = static_cast<std::int64_t>(memory);
  h.peak_flops_fp32 = fp32;
  h.peak_flops_bf16 = bf16;
  h.memory_bw_Bps = memory_bw;
  h.achievable = 0.5;  // typical large-model training MFU: 40-55%
  h.intra = intra;
  h.inter = fabric_400g();
  h.devices_per_node = 8;
  // Runtime context (~0.5-1 GiB), collective library buffers (~0.5 GiB at 8 peers) and
  // caching-allocator fragmentation: 2 GiB stated, override with --overhead-gib.
  h.runtime_overhead_bytes = static_cast<std::int64_t>(2 * kGiB);
  h.sources = std::move(sources);
  return h;
}

}  // namespace

double Hardware::flops_per_s(const Precision& p) const {
  return achievable * (p.name == "bf16" ? peak_flops_bf16 : peak_flops_fp32);
}

std::vector<std::string> hardware_preset_names() { return {"mi300x", "h100", "h200", "cpu"}; }

Hardware hardware_preset(const std::string& name) {
  if (name == "mi300x")
    return gpu("mi300x", "8x AMD Instinct MI300X node (192 GB HBM3, Infinity Fabric)",
               196592 * kMiB, 163.4e12, 1307.4e12, 5.3e12, {5e-6, 300e9},
               "AMD MI300X data sheet: 192 GB HBM3 (rocm-smi 196592 MiB), 5.3 TB/s, 163.4 "
               "TFLOP/s fp32 matrix, 1307.4 TFLOP/s bf16 dense; 7 Infinity Fabric links x 64 GB/s per "
               "direction (448 GB/s peak), 300 GB/s assumed reached by RCCL collectives");
  if (name == "h100")
    return gpu("h100", "8x NVIDIA H100 SXM node (80 GB HBM3, NVLink 4)", 81559 * kMiB, 66.9e12,
               989.4e12, 3.35e12, {3e-6, 360e9},
               "NVIDIA H100 SXM data sheet: 80 GB (nvidia-smi 81559 MiB), 3.35 TB/s, 66.9 "
               "TFLOP/s fp32, "
               "989.4 TFLOP/s bf16 dense; NVLink 4 900 GB/s bidirectional (450 per direction), "
               "~360 GB/s all-reduce bus bandwidth in nccl-tests on 8 GPUs");
  if (name == "h200")
    return gpu("h200", "8x NVIDIA H200 SXM node (141 GB HBM3e, NVLink 4)", 143771 * kMiB,
               66.9e12, 989.4e12, 4.8e12, {3e-6, 360e9},
               "NVIDIA H200 SXM data sheet: 141 GB (nvidia-smi 143771 MiB), 4.8 TB/s, compute "
               "as H100 "
               "SXM (66.9 TFLOP/s fp32, 989.4 TFLOP/s bf16 dense), NVLink 4 as H100");
  if (name == "cpu") {
    Hardware h;
    h.name = "cpu";
    h.description = "this machine: 2 cores, one rank per core, threads transport";
    h.memory_bytes = static_cast<std::int64_t>(11.5 * kGiB);  // 23 GiB shared by 2 ranks
    h.peak_flops_fp32 = 100e9;  // measured GEMM rate per core (docs/results-kernels.md)
    h.peak_flops_bf16 = 100e9;  // the engine computes in fp32
    h.achievable = 1.0;         // the peak above is already a measured rate
    h.memory_bw_Bps = 10e9;     // assumed: one core's share of a DDR channel
    h.intra = {8e-6, 2.5e9};    // threads sendrecv, 2 ranks (docs/results-comm.md)
    h.inter = {100e-6, 0.2e9};  // MPI between processes, 8 ranks (docs/results-comm.md)
    h.devices_per_node = 2;
    h.runtime_overhead_bytes = 0;
    h.sources =
        "docs/results-kernels.md (~105 GFLOP/s per core, fp32 GEMMs), docs/results-comm.md "
        "(threads sendrecv 7.7 us, ~2.5 GB/s at 64 MiB; MPI 8 ranks ~0.2 GB/s), free -g (23 GiB)";
    return h;
  }
  throw ConfigError(fmt::format("unknown hardware preset '{}'; the presets are: {}", name,
                                fmt::join(hardware_preset_names(), ", ")));
}

}  // namespace origami::plan
