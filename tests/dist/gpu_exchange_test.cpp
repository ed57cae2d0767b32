// A net exchanged on its GPU (no host mirror: dist/plan/device_staging.h),
// on a GPU: NCCL's mean in place in the device buffer equals the host path
// (the sum landed on the host, then multiplied there) bit for bit on two
// ranks with a GPU each, and waits for the compute stream's gradients on the
// GPU; a bucket averaged and updated on the device (dist/schemes/
// device_allreduce.h) equals the host's update of the same gradients, in
// fp32 and on the bf16 wire. Without a GPU they skip.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/bf16.h"
#include "core/config_node.h"
#include "core/device_memory.h"
#include "core/net.h"
#include "core/solver.h"
#include "dist/gpu/gpu_allreduce.h"
#include "dist/runtime/nccl_transport.h"
#include "dist/schemes/device_allreduce.h"
#include "dist/schemes/exchange_compute.h"
#include "tests/gpu_required.h"

namespace poseidon::dist {
namespace {

void wait_for(const std::function<bool()>& landed) {
  while (!landed()) std::this_thread::yield();
}

// Each rank a thread with a GPU of its own: the mean in place on the GPU
// against the host path's landed sum times 1/2, in fp32 bit for bit; on the
// bf16 wire the same on both ranks and within bf16's rounding of the mean.
TEST(CudaDeviceExchange, TwoRanksMeanOnTheGpuEqualsTheHostPathBitwise) {
  POSEIDON_SKIP_WITHOUT_GPU();
  if (device_memory::cuda_device_count() < 2)
    GTEST_SKIP() << "needs two GPUs (NCCL takes a GPU per rank); " << device_memory::cuda_device_count() << " visible";
  const std::vector<char> id = GpuAllReduce::unique_id();
  constexpr int64_t kCount = (1 << 20) + 37;
  std::vector<std::vector<float>> inputs(2, std::vector<float>(kCount));
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<float> uni(-3.f, 3.f);
  for (auto& v : inputs)
    for (float& x : v) x = uni(rng);
  std::vector<Tensor> host_path(2), device_path(2), bf16_path(2);
  std::vector<std::string> errors(2);
  auto rank = [&](int r) {
    try {
      const Device gpu = Device::cuda(r);
      GpuAllReduce sums(gpu, id, 2, r);
      Tensor host({kCount});
      std::copy(inputs[r].begin(), inputs[r].end(), host.data());
      Tensor a = host.to(gpu), b = host.to(gpu), c = host.to(gpu);
      sums.mark_gradients_queued();  // the copies above are on the compute stream
      host_path[r] = Tensor({kCount});
      device_memory::synchronize(gpu);
      wait_for(sums.sum_to_host(a.data(), host_path[r].data(), kCount));
      for (int64_t i = 0; i < kCount; ++i) host_path[r][i] *= 0.5f;  // as AllreduceExchange averages a landed sum
      wait_for(sums.mean_in_place(b.data(), kCount));
      device_path[r] = b.to(Device{});
      wait_for(sums.mean_in_place(c.data(), kCount, sums.wire_buffer(kCount)));
      bf16_path[r] = c.to(Device{});
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread first(rank, 0), second(rank, 1);
  first.join();
  second.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(float_bits(device_path[0][i]), float_bits(host_path[0][i])) << i;
    ASSERT_EQ(float_bits(device_path[1][i]), float_bits(host_path[0][i])) << i;
    ASSERT_EQ(float_bits(bf16_path[1][i]), float_bits(bf16_path[0][i])) << i;
    // bfloat16's unit roundoff is u = 2^-8 (8 significant bits). a and b are
    // rounded onto the wire and their sum is rounded: the mean is off by at
    // most u (|a| + |b|) (1 + u / 2), and the float32 reference by 2^-24 of it.
    const float a = inputs[0][i], b = inputs[1][i], mean = 0.5f * (a + b);
    const float bound = 0x1p-8f * (std::abs(a) + std::abs(b)) * (1 + 0x1p-9f) + 0x1p-22f * std::abs(mean);
    ASSERT_LE(std::abs(bf16_path[0][i] - mean), bound) << i;
  }
}

// One rank: the mean is the gradient itself. Behind tens of milliseconds
// of work queued on the compute stream, the mean has not landed 2 ms after
// it was started (NCCL's stream waits for the mark), and when it lands it
// holds the fill queued last before the mark.
TEST(CudaDeviceExchange, MeanWaitsForTheComputeStreamsGradients) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  GpuAllReduce sums(gpu, GpuAllReduce::unique_id(), 1, 0);
  constexpr int64_t kCount = int64_t(1) << 26;
  Tensor grads({kCount}, gpu), busy({kCount}, gpu);
  device_memory::synchronize(gpu);
  for (float value : {3.f, -5.f}) {
    for (int pass = 0; pass < 256; ++pass) busy.fill(float(pass));  // 64 GiB written: queued, not waited for
    device_memory::fill(gpu, grads.data(), kCount, value);
    sums.mark_gradients_queued();
    const std::function<bool()> landed = sums.mean_in_place(grads.data(), kCount);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_FALSE(landed()) << "the mean landed while the compute stream's work before the mark was still queued";
    wait_for(landed);
    const Tensor back = grads.to(Device{});
    for (int64_t i = 0; i < kCount; i += 4099) ASSERT_EQ(back[i], value) << i;
    ASSERT_EQ(back[kCount - 1], value);
  }
}

struct Nets {
  ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net cpu{model, 4};
  Net gpu{model, 4, Device::cuda(0)};
};

std::vector<Param*> learnable(Net& net) {
  std::vector<Param*> out;
  for (Param* p : net.params())
    if (p->learnable) out.push_back(p);
  return out;
}

// One rank's bucket of every LeNet parameter through NCCL on the GPU
// (the mean of one rank is its gradient; on the bf16 wire, its gradient
// rounded to bf16) and the Solver's update there, against the host's
// update of the same gradients, two iterations, in each rule that keeps state.
TEST(CudaDeviceExchange, BucketUpdatedOnTheGpuMatchesTheHostUpdate) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (Wire wire : {Wire::fp32, Wire::bf16})
    for (const char* config : {"{lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}",
                               "{type: adamw, lr: 0.01, weight_decay: 0.1}"}) {
      SCOPED_TRACE(std::string(config) + " on the " + wire_name(wire) + " wire");
      Nets nets;
      nets.cpu.init_params(7);
      nets.gpu.flat_values().copy_from(nets.cpu.flat_values());
      Solver cpu_solver(SolverConfig::parse(ConfigNode::parse(config, "solver")));
      Solver gpu_solver(SolverConfig::parse(ConfigNode::parse(config, "solver")));
      NcclTransport transport(nets.gpu, GpuAllReduce::unique_id(), 1, 0);
      HostCompute compute;
      Tensor& flat = nets.gpu.flat_grads();
      DeviceAllreduceExchange bucket(transport, gpu_solver, compute, learnable(nets.gpu),
                                     DeviceBucket{0, flat.numel(), wire, "lenet"});
      std::mt19937_64 rng(5);
      std::uniform_real_distribution<float> uni(-1.f, 1.f);
      for (int step = 0; step < 2; ++step) {
        Tensor& grads = nets.cpu.flat_grads();
        for (int64_t i = 0; i < grads.numel(); ++i) grads[i] = uni(rng);
        flat.copy_from(grads);  // on the compute stream, as backward writes them
        if (wire == Wire::bf16) round_to_bf16(grads.data(), grads.numel());
        transport.gradients_queued();
        InFlight in_flight;
        bucket.start(in_flight);
        while (!in_flight.empty()) in_flight.poll();
        cpu_solver.update_all(learnable(nets.cpu));  // HostCompute::update's call, on the host
      }
      const Tensor got = nets.gpu.flat_values().to(Device{});
      const Tensor& want = nets.cpu.flat_values();
      // One rank's mean is its gradient exactly, and the update rounds as
      // the host's does (no fused multiply-adds): the same bits.
      for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << i;
    }
}

}  // namespace
}  // namespace poseidon::dist
