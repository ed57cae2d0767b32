// A GPU net's distribution pieces (dist/gpu/), on a GPU: asynchronous
// copies round-trip (staging_streams.h), a GPU net staged through a host
// mirror trains as the same net on the CPU (host_staging_sink.h), the GPU
// GEMM SFB rebuilds with agrees with the host's (gpu_gemm.h), and NCCL's
// sums land in host memory, the same on every rank (gpu_allreduce.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/config_node.h"
#include "core/device_memory.h"
#include "core/local_sink.h"
#include "core/math.h"
#include "core/net.h"
#include "core/solver.h"
#include "dist/gpu/gpu_allreduce.h"
#include "dist/gpu/gpu_gemm.h"
#include "dist/gpu/host_staging_sink.h"
#include "dist/gpu/staging_streams.h"
#include "tests/gpu_required.h"

namespace poseidon::dist {
namespace {

TEST(CudaStaging, DownloadThenUploadRoundTrips) {
  POSEIDON_SKIP_WITHOUT_GPU();
  Tensor host({4096});
  for (int64_t i = 0; i < host.numel(); ++i) host[i] = static_cast<float>(i) - 7.f;
  Tensor gpu = host.to(Device::cuda(0));
  Tensor landed({4096}), back({4096});
  StagingStreams streams(Device::cuda(0));
  streams.pin(landed.data(), 4096 * sizeof(float));
  streams.wait(streams.download({{landed.data(), gpu.data(), 4096 * sizeof(float)}}));
  for (int64_t i = 0; i < 4096; ++i) ASSERT_EQ(landed[i], host[i]) << i;
  for (int64_t i = 0; i < 4096; ++i) landed[i] *= 2.f;
  streams.upload({{gpu.data(), landed.data(), 4096 * sizeof(float)}});
  back.copy_from(gpu);  // on the compute stream, which waits for the upload
  for (int64_t i = 0; i < 4096; ++i) ASSERT_EQ(back[i], 2.f * host[i]) << i;
}

// Three SGD steps of LeNet on the GPU, its gradients staged down to a host
// mirror that the solver updates and its parameters staged back up at each
// layer's gate, against the same steps on the CPU.
TEST(CudaStaging, GpuNetThroughAHostMirrorTrainsAsOnTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net cpu(model, 8), mirror(model, 8), gpu(model, 8, Device::cuda(0));
  cpu.init_params(5);
  copy_net_state(cpu, mirror);
  copy_net_state(cpu, gpu);
  auto solver_config = [] { return SolverConfig::parse(ConfigNode::parse("{lr: 0.05, momentum: 0.9}", "solver")); };
  Solver cpu_solver(solver_config()), mirror_solver(solver_config());
  LocalGradSink cpu_sink(cpu_solver), mirror_sink(mirror_solver);
  HostStagingSink staging(gpu, mirror, mirror_sink);
  std::mt19937_64 data_rng(9);
  std::uniform_real_distribution<float> pixel(-1.f, 1.f);
  std::mt19937_64 rng(1);
  for (int step = 0; step < 3; ++step) {
    Tensor& data = cpu.blob("data").value;
    Tensor& label = cpu.blob("label").value;
    for (int64_t i = 0; i < data.numel(); ++i) data[i] = pixel(data_rng);
    for (int64_t i = 0; i < label.numel(); ++i) label[i] = static_cast<float>((i * 7 + step) % 10);
    gpu.blob("data").value.copy_from(data);
    gpu.blob("label").value.copy_from(label);
    RunContext cpu_ctx{Phase::train, &rng, Device{}};
    RunContext gpu_ctx{Phase::train, &rng, Device::cuda(0)};
    const float cpu_loss = cpu.forward(cpu_ctx);
    cpu.backward(cpu_ctx, cpu_sink);
    const float gpu_loss = gpu.forward(gpu_ctx, &staging);
    gpu.backward(gpu_ctx, staging);  // ends with backward_done: every gradient handed over
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-4f * std::max(1.f, std::abs(cpu_loss))) << "step " << step;
  }
  auto want = cpu.params();
  auto got = mirror.params();
  ASSERT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size(); ++k)
    for (int64_t i = 0; i < want[k]->value.numel(); ++i)
      ASSERT_NEAR(got[k]->value[i], want[k]->value[i], 1e-4f * std::max(1.f, std::abs(want[k]->value[i])))
          << want[k]->name << " [" << i << "]";
}

// Every transpose combination, with beta 0 (SFB's rebuild) and beta 1, and a
// larger product after a smaller one (the device buffers grow).
TEST(CudaGemm, HostBuffersOnTheGpuMatchTheHostGemm) {
  POSEIDON_SKIP_WITHOUT_GPU();
  GpuGemm on_gpu(Device::cuda(0));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t scale : {1, 7})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.f, 1.f}) {
          const int64_t m = 13 * scale, n = 9 * scale, k = 21 * scale;
          std::vector<float> a(m * k), b(k * n), want(m * n), got(m * n);
          for (float& x : a) x = uni(rng);
          for (float& x : b) x = uni(rng);
          for (size_t i = 0; i < want.size(); ++i) want[i] = got[i] = uni(rng);
          gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), beta, want.data());
          on_gpu(ta, tb, m, n, k, 0.5f, a.data(), b.data(), beta, got.data());
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 1e-4f * std::max(1.f, std::abs(want[i])))
                << "m " << m << " ta " << ta << " tb " << tb << " beta " << beta << " [" << i << "]";
        }
}

TEST(CudaAllReduce, OneRanksSumLandsOnTheHost) {
  POSEIDON_SKIP_WITHOUT_GPU();
  GpuAllReduce sums(Device::cuda(0), GpuAllReduce::unique_id(), 1, 0);
  Tensor host({3000});
  for (int64_t i = 0; i < host.numel(); ++i) host[i] = 0.25f * static_cast<float>(i);
  Tensor gpu = host.to(Device::cuda(0));
  device_memory::synchronize(Device::cuda(0));  // the sum's stream does not wait for the compute stream
  Tensor landed({3000});
  const std::function<bool()> done = sums.sum_to_host(gpu.data(), landed.data(), 3000);
  while (!done()) std::this_thread::yield();
  for (int64_t i = 0; i < 3000; ++i) ASSERT_EQ(landed[i], host[i]) << i;
  EXPECT_EQ(GpuAllReduce::gpu_identity(Device::cuda(0)).rfind("GPU-", 0), 0u) << "a UUID, as nvidia-smi -L shows it";
}

// Two ranks' sums through NCCL, each rank a thread with a GPU of its own
// (NCCL cannot put two ranks on one GPU): every rank receives the same sum.
TEST(CudaAllReduce, TwoRanksOnTwoGpusReceiveTheSameSum) {
  POSEIDON_SKIP_WITHOUT_GPU();
  if (device_memory::cuda_device_count() < 2)
    GTEST_SKIP() << "needs two GPUs (NCCL takes a GPU per rank); " << device_memory::cuda_device_count() << " visible";
  const std::vector<char> id = GpuAllReduce::unique_id();
  constexpr int64_t kCount = 1 << 20;
  std::vector<Tensor> landed(2);
  std::vector<std::string> errors(2);
  auto rank = [&](int r) {
    try {
      const Device gpu = Device::cuda(r);
      GpuAllReduce sums(gpu, id, 2, r);  // collective: returns once both ranks joined
      Tensor host({kCount});
      for (int64_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((i % 1000) * (r + 1));
      Tensor on_gpu = host.to(gpu);
      device_memory::synchronize(gpu);
      landed[r] = Tensor({kCount});
      const std::function<bool()> done = sums.sum_to_host(on_gpu.data(), landed[r].data(), kCount);
      while (!done()) std::this_thread::yield();
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
    ASSERT_EQ(landed[0][i], static_cast<float>((i % 1000) * 3)) << i;
    ASSERT_EQ(landed[1][i], landed[0][i]) << i;
  }
  EXPECT_NE(GpuAllReduce::gpu_identity(Device::cuda(0)), GpuAllReduce::gpu_identity(Device::cuda(1)));
}

}  // namespace
}  // namespace poseidon::dist
