// The finite guard of a training step (core/step_gate.h): the pass over loss
// terms and gradients flags any NaN or infinity and keeps the flag; a step
// read finite took its updates, one read non-finite took none, and neither
// did a step closed after it before it was read. On the GPU the pass is a
// kernel compared with its host reference (core/gate_scan.h) bit for bit,
// the update launches read its flag themselves, and the readings and
// parameters equal those of the host's gate step by step.
#include "core/step_gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gpu_required.h"

namespace poseidon {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(GateScan, CopiesTheTermsAndKeepsAFlagForAnyNonFiniteValue) {
  std::vector<float> grads(1000, 0.5f), gate(3, 0.f);
  const float terms[2] = {1.5f, -2.f};
  GateScan scan;
  scan.terms[0] = &terms[0];
  scan.terms[1] = &terms[1];
  scan.count = 2;
  scan.grads = grads.data();
  scan.n = int64_t(grads.size());
  gate_scan_on_host(scan, gate.data());
  EXPECT_EQ(gate, (std::vector<float>{1.5f, -2.f, 0.f}));
  grads[999] = -kInf;
  gate_scan_on_host(scan, gate.data());
  EXPECT_EQ(gate[2], 1.f);
  // Once set, a finite pass leaves the flag as it is.
  grads[999] = 0.5f;
  gate_scan_on_host(scan, gate.data());
  EXPECT_EQ(gate[2], 1.f);
  std::fill(gate.begin(), gate.end(), 0.f);
  const float bad_term[2] = {kNan, 1.f};
  scan.terms[0] = &bad_term[0];
  gate_scan_on_host(scan, gate.data());
  EXPECT_TRUE(std::isnan(gate[0]));
  EXPECT_EQ(gate[2], 1.f);
}

constexpr const char* kModel = R"(name: gated
inputs: {data: [2, 5, 5], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 3, kernel_size: 3}
  - {name: fc1, type: fc, num_output: 6}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

// A net on `device` with its own adam solver, stepped through a StepGate;
// no ReLU, so that a NaN input reaches the loss.
struct GatedNet {
  Net net;
  Solver solver{SolverConfig::parse(ConfigNode::parse("{type: adam, lr: 0.01}", "solver"))};
  LocalGradSink held{solver, true};
  StepGate gate{net, solver};
  std::mt19937_64 rng{5};

  explicit GatedNet(const Device& device) : net(ConfigNode::parse(kModel, "model.yaml"), 4, device) {
    net.init_params(3);
  }
  // Forward and backward of batch `seed` (poisoned: one input is NaN), closed in `slot`.
  void step(int slot, uint64_t seed, bool poisoned) {
    Tensor data({4, 2, 5, 5}), label({4});
    std::mt19937_64 draw(seed);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < data.numel(); ++i) data[i] = normal(draw);
    for (int64_t i = 0; i < label.numel(); ++i) label[i] = float((i + seed) % 3);
    if (poisoned) data[17] = kNan;
    net.blob("data").value.copy_from(data);
    net.blob("label").value.copy_from(label);
    solver.set_iteration(int64_t(seed));
    RunContext ctx{Phase::train, &rng, net.device()};
    net.run_forward(ctx);
    net.backward(ctx, held);
    gate.close(slot, held);
  }
  Tensor values() {  // a copy (to() would share a host tensor's storage)
    Tensor copy(net.flat_values().shape());
    copy.copy_from(net.flat_values());
    return copy;
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

// Steps 0 and 1 finite, step 2 poisoned, step 3 finite but closed before
// step 2 is read: `expect` sees each reading and the parameters.
template <class Expect>
void run_gated_steps(const Device& device, Expect expect) {
  GatedNet g(device);
  Tensor before = g.values();
  g.step(0, 0, false);
  StepGate::Reading r0 = g.gate.read(0);
  Tensor after0 = g.values();
  g.step(1, 1, false);
  g.step(0, 2, true);  // read after the next step is closed
  Tensor after2 = g.values();
  StepGate::Reading r1 = g.gate.read(1);
  g.step(1, 3, false);
  StepGate::Reading r2 = g.gate.read(0);
  expect(g, before, r0, after0, r1, r2, after2);
}

TEST(StepGate, UpdatesOnlyUntilAStepIsNotFinite) {
  run_gated_steps(Device{}, [](GatedNet& g, const Tensor& before, const StepGate::Reading& r0, const Tensor& after0,
                               const StepGate::Reading& r1, const StepGate::Reading& r2, const Tensor& after2) {
    EXPECT_TRUE(r0.finite);
    EXPECT_TRUE(r1.finite);
    EXPECT_TRUE(std::isfinite(r0.loss));
    EXPECT_FALSE(same_bits(before, after0));  // step 0 was applied
    EXPECT_FALSE(r2.finite);
    EXPECT_NE(r2.what.find("non-finite loss (nan), first in the input 'data'"), std::string::npos) << r2.what;
    // Step 2 took no update, nor did step 3 closed after it.
    EXPECT_TRUE(same_bits(after2, g.values()));
    EXPECT_EQ(g.solver.steps().at("fc1.weight"), 2);
  });
}

TEST(CudaStepGate, ScanMatchesTheHostBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  // Long enough for several grid-stride passes; each bad value alone.
  const int64_t n = int64_t(3) << 20;
  Tensor grads({n});
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) grads[i] = uni(rng);
  Tensor terms({2});
  terms[0] = 0.25f;
  terms[1] = 3.f;
  Tensor device_grads = grads.to(gpu), device_terms = terms.to(gpu);
  for (int64_t bad_at : {int64_t(-1), int64_t(0), int64_t(777), n - 1, int64_t(n + 1)}) {
    SCOPED_TRACE(bad_at);
    Tensor host_grads = grads.to(Device{}), host_terms = terms.to(Device{});
    if (bad_at >= 0 && bad_at < n) host_grads[bad_at] = bad_at % 2 ? kNan : -kInf;
    if (bad_at == n + 1) host_terms[1] = kInf;
    device_grads.copy_from(host_grads);
    device_terms.copy_from(host_terms);
    auto scan_of = [&](const Tensor& t, const Tensor& g) {
      GateScan s;
      s.terms[0] = t.data();
      s.terms[1] = t.data() + 1;
      s.count = 2;
      s.grads = g.data();
      s.n = g.numel();
      return s;
    };
    Tensor host_gate({3}), device_gate({3}, gpu);
    gate_scan_on_host(scan_of(host_terms, host_grads), host_gate.data());
    device_memory::gpu_gate_scan(gpu, scan_of(device_terms, device_grads), device_gate.data());
    Tensor back = device_gate.to(Device{});
    EXPECT_TRUE(same_bits(back, host_gate)) << back[0] << " " << back[1] << " " << back[2];
    EXPECT_EQ(back[2], bad_at >= 0 ? 1.f : 0.f);
  }
}

TEST(CudaStepGate, ReadingsAndUpdatesMatchTheHostGate) {
  POSEIDON_SKIP_WITHOUT_GPU();
  struct Seen {
    Tensor before, after0, after2, last;
    StepGate::Reading r0, r1, r2;
    int64_t steps = 0;
  };
  auto record = [](Seen& seen) {
    return [&seen](GatedNet& g, const Tensor& before, const StepGate::Reading& r0, const Tensor& after0,
                   const StepGate::Reading& r1, const StepGate::Reading& r2, const Tensor& after2) {
      seen = {before, after0, after2, g.values(), r0, r1, r2, g.solver.steps().at("fc1.weight")};
    };
  };
  Seen cpu, gpu;
  run_gated_steps(Device{}, record(cpu));
  run_gated_steps(Device::cuda(0), record(gpu));
  EXPECT_TRUE(gpu.r0.finite);
  EXPECT_TRUE(gpu.r1.finite);
  EXPECT_FALSE(gpu.r2.finite);
  EXPECT_TRUE(gpu.r2.what.empty());  // the trainer runs the step again to say where
  EXPECT_NEAR(gpu.r0.loss, cpu.r0.loss, 1e-5f * std::max(1.f, std::fabs(cpu.r0.loss)));
  EXPECT_NEAR(gpu.r1.loss, cpu.r1.loss, 1e-5f * std::max(1.f, std::fabs(cpu.r1.loss)));
  EXPECT_TRUE(std::isnan(gpu.r2.loss));
  EXPECT_FALSE(same_bits(gpu.before, gpu.after0));
  // The poisoned step and the one closed after it changed nothing on the
  // device, and their step counts were taken back when it was read.
  EXPECT_TRUE(same_bits(gpu.after2, gpu.last));
  EXPECT_EQ(gpu.steps, cpu.steps);
  for (int64_t i = 0; i < cpu.last.numel(); ++i)
    ASSERT_NEAR(gpu.last[i], cpu.last[i], 1e-4f * std::max(1.f, std::fabs(cpu.last[i]))) << i;
}

}  // namespace
}  // namespace poseidon
