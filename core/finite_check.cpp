// NaN and infinity checks over the Net's gradients and parameters.
#include "core/finite_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/bf16.h"
#include "core/device_memory.h"

namespace poseidon {

namespace {
// Below this many elements one thread reads faster than a team starts.
constexpr int64_t kParallelFrom = int64_t(1) << 18;

// The first non-finite tensor that `view` picks from a parameter, visiting
// layers last to first when `backward_order`, first to last otherwise.
int64_t first_non_finite_in(const Tensor& t) {
  // A bfloat16 blob (core/blob_types.h) is non-finite where its exponent
  // bits are all set, as a float's.
  if (t.dtype() == DType::bf16 && !t.is_cuda()) {
    const uint16_t* h = t.bf16_data();
    for (int64_t i = 0; i < t.numel(); ++i)
      if ((h[i] & 0x7f80) == 0x7f80) return i;
    return -1;
  }
  // On a GPU a bfloat16 blob is widened first (exactly: the same elements
  // are non-finite).
  if (t.is_cuda() && t.dtype() == DType::bf16) return first_non_finite_in(t.to(DType::f32));
  return t.is_cuda() ? device_memory::gpu_first_non_finite(t.device(), t.data(), t.numel())
                     : first_non_finite(t.data(), t.numel());
}

template <class Pick>
std::optional<NonFinite> scan(Net& net, bool backward_order, Pick view) {
  const size_t n = net.num_layers();
  for (size_t k = 0; k < n; ++k) {
    Layer& layer = net.layer(backward_order ? n - 1 - k : k);
    for (Param& p : layer.params()) {
      const Tensor* t = view(p);
      if (!t || !t->defined()) continue;
      const int64_t at = first_non_finite_in(*t);
      if (at >= 0) return NonFinite{layer.name(), p.name, at, t->item(at)};
    }
  }
  return std::nullopt;
}
}  // namespace

bool all_finite(const float* data, int64_t n) {
  // x * 0 is 0 for every finite x and NaN for NaN and both infinities, so one
  // sum answers for the whole buffer without a branch per element.
  float sum = 0.f;
#pragma omp parallel for simd reduction(+ : sum) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i) sum += data[i] * 0.f;
  return sum == 0.f;
}

float max_abs(const float* data, int64_t n) {
  float largest = 0.f, poison = 0.f;  // poison: NaN once a non-finite value was seen (see all_finite)
#pragma omp parallel for simd reduction(max : largest) reduction(+ : poison) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::fabs(data[i]));
    poison += data[i] * 0.f;
  }
  return poison == 0.f ? largest : std::numeric_limits<float>::quiet_NaN();
}

float max_abs_bf16(const uint16_t* bits, int64_t n) {
  // Without the sign, the bits of bfloat16 order as their magnitudes do,
  // and an infinity's or a NaN's lie above every finite value's.
  uint16_t largest = 0;
#pragma omp parallel for simd reduction(max : largest) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i) largest = std::max<uint16_t>(largest, bits[i] & 0x7fff);
  return largest >= 0x7f80 ? std::numeric_limits<float>::quiet_NaN() : from_bf16(largest);
}

bool product_sums_finite(float max_a, float max_b, int64_t terms) {
  constexpr double kQuarter = std::numeric_limits<float>::max() / 4.0;
  constexpr int64_t kMaxTerms = int64_t(1) << 22;
  if (!(max_a <= kQuarter && max_b <= kQuarter) || terms < 0 || terms >= kMaxTerms) return false;
  return double(terms) * max_a * max_b <= kQuarter / 2;
}

int64_t first_non_finite(const float* data, int64_t n) {
  if (all_finite(data, n)) return -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(data[i])) return i;
  return -1;
}

std::string non_finite_text(float v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

std::string NonFinite::describe(const std::string& what) const {
  return what + " in layer '" + layer + "', tensor '" + tensor + "' (first at index " + std::to_string(index) + ": " +
         non_finite_text(value) + ")";
}

namespace {

// Whether every learnable gradient is finite: one pass over the flat buffer
// but for the gradients layers proved finite. Learnable gradients lie in the
// buffer in layer order, so those between two proven ones are read as one
// run (with the padding between them), in parallel like the whole buffer.
bool gradients_finite(Net& net) {
  const Tensor& grads = net.flat_grads();
  if (grads.is_cuda()) return device_memory::gpu_first_non_finite(grads.device(), grads.data(), grads.numel()) < 0;
  const float* run_begin = nullptr;
  const float* run_end = nullptr;
  bool finite = true;
  auto check_run = [&] {
    if (run_begin) finite = finite && all_finite(run_begin, run_end - run_begin);
    run_begin = nullptr;
  };
  for (size_t k = 0; k < net.num_layers(); ++k)
    for (const Param& p : net.layer(k).params()) {
      if (!p.learnable) continue;
      if (p.grad_bounded) {
        check_run();
        continue;
      }
      if (!run_begin) run_begin = p.grad.data();
      run_end = p.grad.data() + p.grad.numel();
    }
  check_run();
  return finite;
}

}  // namespace

std::optional<NonFinite> find_non_finite_gradient(Net& net) {
  if (gradients_finite(net)) return std::nullopt;
  return scan(net, true, [](Param& p) { return p.learnable ? &p.grad : nullptr; });
}

std::optional<NonFinite> find_non_finite_value(Net& net) {
  return scan(net, false, [](Param& p) { return &p.value; });
}

std::optional<NonFinite> find_non_finite_output(Net& net) {
  auto first_in = [&](const std::string& layer, const std::string& blob) -> std::optional<NonFinite> {
    const Tensor& t = net.blob(blob).value;
    if (!t.defined() || t.numel() == 0) return std::nullopt;
    const int64_t at = first_non_finite_in(t);
    if (at < 0) return std::nullopt;
    return NonFinite{layer, blob, at, t.item(at)};
  };
  for (const std::string& input : net.input_names())
    if (auto bad = first_in("", input)) return bad;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    if (net.fused(i)) continue;
    for (const std::string& output : net.layer(i).outputs())
      if (auto bad = first_in(net.layer(i).name(), output)) return bad;
  }
  return std::nullopt;
}

std::string describe_non_finite_loss(float loss, Net& net) {
  std::string text = "non-finite loss (" + non_finite_text(loss) + ")";
  const std::optional<NonFinite> bad = find_non_finite_output(net);
  if (!bad) return text;
  const std::string at = "first at index " + std::to_string(bad->index) + ": " + non_finite_text(bad->value) + ")";
  if (bad->layer.empty()) return text + ", first in the input '" + bad->tensor + "' (" + at;
  return text + ", first in the output of layer '" + bad->layer + "' (blob '" + bad->tensor + "', " + at;
}

}  // namespace poseidon
