// Dropout: in training each element is zeroed with probability `ratio` and the
// survivors are scaled by 1 / (1 - ratio) (inverted dropout, as PyTorch), so
// the test phase is the identity. The mask comes from the run's RNG with a
// platform-independent draw, so a seed reproduces it everywhere.
#include "core/registry.h"

namespace poseidon {
namespace {

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(const ConfigNode& config)
      : Layer(config), ratio_(config.get_double("ratio", 0.5)) {
    if (!(ratio_ >= 0.0 && ratio_ < 1.0))
      fail("ratio must be in [0, 1), got " + std::to_string(ratio_), "ratio");
  }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override {
    mask_.resize(in[0]);
    return {in[0]};
  }

  void forward(LayerIO& io, RunContext& ctx) override {
    const float* x = io.in[0]->data();
    float* y = io.out[0]->data();
    const int64_t n = io.in[0]->numel();
    masked_ = ctx.phase == Phase::train;
    if (!masked_) {
      io.out[0]->copy_from(*io.in[0]);
      return;
    }
    POSEIDON_CHECK(ctx.rng) << "dropout '" << name() << "' runs in training without an RNG";
    // The draws are sequential so that the mask does not depend on the thread count.
    const float scale = static_cast<float>(1.0 / (1.0 - ratio_));
    float* mask = mask_.data();
    std::mt19937_64& rng = *ctx.rng;
    for (int64_t i = 0; i < n; ++i) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // uniform in [0, 1)
      mask[i] = u < ratio_ ? 0.f : scale;
    }
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
  }

  void backward(LayerIO& io, RunContext&) override {
    if (!io.in_grad[0]) return;
    const float* dy = io.out_grad[0]->data();
    float* dx = io.in_grad[0]->data();
    const int64_t n = io.out_grad[0]->numel();
    if (!masked_) {
#pragma omp parallel for simd if (n > 32768)
      for (int64_t i = 0; i < n; ++i) dx[i] += dy[i];
      return;
    }
    const float* mask = mask_.data();
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * mask[i];
  }

  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }

 private:
  double ratio_;
  Tensor mask_;          // 0 or 1 / (1 - ratio) per element, from the last training forward
  bool masked_ = false;  // whether the last forward applied the mask
};

}  // namespace

POSEIDON_REGISTER_LAYER(DropoutLayer, "dropout",
                        "inverted dropout: zeroes elements with probability ratio in training, "
                        "identity at test",
                        {{"ratio", "float", "0.5",
                          "probability of zeroing an element, in [0, 1)"}});

}  // namespace poseidon
