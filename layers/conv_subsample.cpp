// Strided pixel copies for strided 1x1 convolutions (see conv_subsample.h).
#include "layers/conv_subsample.h"

#include <algorithm>

namespace poseidon {

void subsample_pixels(const float* full, const SubsampleShape& s, float* sub) {
  const int64_t oh = s.out_height(), ow = s.out_width();
#pragma omp parallel for schedule(static) if (s.planes * oh * ow > 32768)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t y = 0; y < oh; ++y) {
      const float* row = full + (p * s.height + y * s.stride_h) * s.width;
      float* out = sub + (p * oh + y) * ow;
      for (int64_t x = 0; x < ow; ++x) out[x] = row[x * s.stride_w];
    }
}

void scatter_pixels(const float* sub, const SubsampleShape& s, float* full, bool overwrite) {
  const int64_t oh = s.out_height(), ow = s.out_width();
#pragma omp parallel for schedule(static) if (s.planes * s.height * s.width > 32768)
  for (int64_t p = 0; p < s.planes; ++p) {
    float* plane = full + p * s.height * s.width;
    if (overwrite) std::fill(plane, plane + s.height * s.width, 0.f);
    for (int64_t y = 0; y < oh; ++y) {
      float* row = plane + y * s.stride_h * s.width;
      const float* in = sub + (p * oh + y) * ow;
      for (int64_t x = 0; x < ow; ++x) row[x * s.stride_w] += in[x];
    }
  }
}

}  // namespace poseidon
