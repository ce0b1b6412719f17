// Rotary position embedding on global positions, Hugging Face Llama convention (the rotated
// pairs are (i, i + d/2), "rotate_half"), applied in place.
#pragma once

#include <cstdint>

#include "origami/core/bf16.h"
#include <vector>

namespace origami {

// Hugging Face's rope_scaling (config.json): how the inverse frequencies theta^(-2i/d) are
// changed for a context longer than the one pre-trained on. Plain data, read by the config
// parser (model/config.cpp) and used by the frequency table below.
struct RopeScaling {
  enum class Type { None, Linear, Llama3 };
  Type type = Type::None;
  double factor = 1.0;  // Linear and Llama3: how much longer the context is
  // Llama3 only (transformers' _compute_llama3_parameters).
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192;

  bool operator==(const RopeScaling&) const = default;
};

}  // namespace origami

namespace origami::kernels {

// The d/2 inverse frequencies of RoPE in float64: theta^(-2i/d), then scaled as `scaling`
// says. Linear: divided by factor. Llama3, with wavelength w = 2 pi / f and L the original
// context: unchanged when w < L / high_freq_factor, divided by factor when
// w > L / low_freq_factor, and in between (1 - s) f / factor + s f with
// s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor).
// This is the one place that formula lives.
std::vector<double> rope_inverse_frequencies(std::int64_t head_dim, double theta,
                                             const RopeScaling& scaling = {});

// Fills cos/sin tables [max_pos, d/2]: angle(p, i) = p * inv_freq[i] (the frequencies above),
// computed in double.
void rope_table(std::int64_t max_pos, std::int64_t head_dim, double theta,
                const RopeScaling& scaling, float* cos_table, float* sin_table);
// Plain RoPE (no scaling).
void rope_table(std::int64_t max_pos, std::int64_t head_dim, double theta, float* cos_table,
                float* sin_table);

// x: [B, seq, heads, d], rotated in place by the angle of pos[s] (global, < max_pos of the
// tables). d must be even.
void rope_forward(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                  const std::int64_t* pos, const float* cos_table, const float* sin_table, float* x);
// The transpose (inverse) rotation, in place: turns dL/d(rotated) into dL/d(unrotated).
void rope_backward(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                   const std::int64_t* pos, const float* cos_table, const float* sin_table,
                   float* dx);

// The same rotations on bf16 rows (rope.cpp, the same template as fp32), in place, with the fp32 tables: each pair is
// widened, rotated in fp32 and rounded once to bf16 (nearest even).
void rope_forward_bf16(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                       const float* sin_table, bf16* x);
void rope_backward_bf16(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                        std::int64_t head_dim, const std::int64_t* pos, const float* cos_table,
                        const float* sin_table, bf16* dx);

}  // namespace origami::kernels
