// Rotary position embedding on global positions, Hugging Face Llama convention (the rotated
// pairs are (i, i + d/2), "rotate_half"), applied in place.
#pragma once

#include <cstdint>

namespace origami::kernels {

// Fills cos/sin tables [max_pos, d/2]: angle(p, i) = p * theta^(-2i/d), computed in double.
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

}  // namespace origami::kernels
