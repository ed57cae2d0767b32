// The CUDA backend's own pieces: that it is built wherever nvcc is, and on a
// GPU that tensors round-trip, the caching allocator reuses blocks (a
// training step allocates nothing from the driver after the first), and the
// solver's update and the finite check agree with the CPU's, and a GPU net
// staged through a host mirror (asynchronous copies, core/staging_streams.h)
// trains as the same net on the CPU, the GPU GEMM SFB rebuilds with agrees
// with the host's, and NCCL's sum of one rank lands in host memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "core/config_node.h"
#include "core/device_memory.h"
#include "core/finite_check.h"
#include "core/gpu_allreduce.h"
#include "core/gpu_gemm.h"
#include "core/host_staging_sink.h"
#include "core/local_sink.h"
#include "core/math.h"
#include "core/net.h"
#include "core/solver.h"
#include "core/staging_streams.h"
#include "gpu_required.h"
#ifdef POSEIDON_HAVE_CUDA
#include "core/cuda/context.h"
#endif

namespace poseidon {
namespace {

bool nvcc_present() {
  if (std::filesystem::exists("/usr/local/cuda/bin/nvcc")) return true;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "nvcc")) return true;
  return false;
}


TEST(CudaBuild, BuiltWhereverNvccIs) {
  if (std::string(POSEIDON_CUDA_OPTION) == "OFF") GTEST_SKIP() << "configured with POSEIDON_CUDA=OFF";
  if (!nvcc_present()) GTEST_SKIP() << "no nvcc on this machine";
  EXPECT_TRUE(device_memory::cuda_built()) << "nvcc is installed but the CUDA backend was not compiled";
}

TEST(CudaBuild, AMissingBackendSaysWhetherItWasLeftOutOrNotFound) {
  const std::string off = device_memory::missing_backend_reason("OFF");
  EXPECT_NE(off.find("POSEIDON_CUDA=OFF"), std::string::npos) << off;
  EXPECT_EQ(off.find("nvcc"), std::string::npos) << off;
  const std::string automatic = device_memory::missing_backend_reason("AUTO");
  EXPECT_NE(automatic.find("nvcc was not found"), std::string::npos) << automatic;
  if (!device_memory::cuda_built())
    EXPECT_EQ(device_memory::cuda_unavailable_reason(), device_memory::missing_backend_reason(POSEIDON_CUDA_OPTION));
}

TEST(CudaBuild, WithoutAGpuCudaDevicesAreRefusedClearly) {
  if (device_memory::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Tensor t({4}, Device::cuda(0));
    FAIL() << "a tensor was allocated on a GPU that is not there";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(CudaTensor, RoundTripFillAndItem) {
  POSEIDON_SKIP_WITHOUT_GPU();
  Tensor host({1000});
  for (int64_t i = 0; i < host.numel(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  Tensor gpu = host.to(Device::cuda(0));
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_EQ(gpu.item(999), 499.5f);
  Tensor back = gpu.to(Device{});
  for (int64_t i = 0; i < host.numel(); ++i) ASSERT_EQ(back[i], host[i]);
  gpu.fill(3.f);
  EXPECT_EQ(gpu.item(17), 3.f);
  Tensor fresh({8}, Device::cuda(0));
  EXPECT_EQ(fresh.item(7), 0.f);
}

#ifdef POSEIDON_HAVE_CUDA
TEST(CudaAllocator, ReusesFreedBlocks) {
  POSEIDON_SKIP_WITHOUT_GPU();
  auto& alloc = cuda::Context::get(0).allocator();
  { Tensor a({1 << 20}, Device::cuda(0)); }
  size_t before = alloc.stats().driver_allocations;
  for (int i = 0; i < 10; ++i) Tensor b({1 << 20}, Device::cuda(0));
  EXPECT_EQ(alloc.stats().driver_allocations, before);
}

TEST(CudaAllocator, TrainingStepsAllocateNothingAfterTheFirst) {
  POSEIDON_SKIP_WITHOUT_GPU();
  ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net net(model, 16, Device::cuda(0));
  net.init_params(1);
  Solver solver(SolverConfig::parse(ConfigNode::parse("{lr: 0.01, momentum: 0.9}", "solver")));
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, Device::cuda(0)};
  LocalGradSink sink(solver);
  auto step = [&] {
    net.forward(ctx);
    net.backward(ctx, sink);
    device_memory::synchronize(Device::cuda(0));
  };
  step();
  size_t after_first = cuda::Context::get(0).allocator().stats().driver_allocations;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(cuda::Context::get(0).allocator().stats().driver_allocations, after_first);
}
#endif

TEST(CudaSolver, UpdateMatchesTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  Solver solver(SolverConfig::parse(
      ConfigNode::parse("{lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}", "solver")));
  Param cpu;
  cpu.name = "w";
  cpu.shape = {257};
  cpu.value = Tensor({257});
  cpu.grad = Tensor({257});
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < 257; ++i) cpu.value[i] = uni(rng), cpu.grad[i] = uni(rng);
  Param gpu;
  gpu.name = "w_gpu";
  gpu.shape = {257};
  gpu.value = cpu.value.to(Device::cuda(0));
  gpu.grad = cpu.grad.to(Device::cuda(0));
  for (int step = 0; step < 3; ++step) {
    solver.update(cpu);
    solver.update(gpu);
  }
  Tensor back = gpu.value.to(Device{});
  for (int64_t i = 0; i < 257; ++i) EXPECT_NEAR(back[i], cpu.value[i], 1e-6 * std::max(1.f, std::abs(cpu.value[i])));
}

// Solver::update_all's launches per group of parameters (core/
// update_groups.h) against the CPU's per-parameter update, over more
// parameters than one group holds, in each rule that keeps state.
TEST(CudaSolver, UpdateAllMatchesTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (const char* config : {"{lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}",
                             "{type: adamw, lr: 0.01, weight_decay: 0.1}",
                             "{type: rmsprop, lr: 0.01, momentum: 0.5, centered: true}"}) {
    SCOPED_TRACE(config);
    Solver cpu_solver(SolverConfig::parse(ConfigNode::parse(config, "solver")));
    Solver gpu_solver(SolverConfig::parse(ConfigNode::parse(config, "solver")));
    std::vector<Param> cpu(45), gpu(45);
    std::vector<Param*> gpu_list;
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    for (size_t k = 0; k < cpu.size(); ++k) {
      const int64_t n = k == 7 ? 0 : int64_t(k * 977 % 3001 + 1);
      cpu[k].name = gpu[k].name = "p" + std::to_string(k);
      cpu[k].shape = gpu[k].shape = {n};
      cpu[k].lr_mult = gpu[k].lr_mult = k % 2 ? 1.f : 2.f;
      cpu[k].value = Tensor({n});
      cpu[k].grad = Tensor({n});
      for (int64_t i = 0; i < n; ++i) cpu[k].value[i] = uni(rng), cpu[k].grad[i] = uni(rng);
      gpu[k].value = cpu[k].value.to(Device::cuda(0));
      gpu[k].grad = cpu[k].grad.to(Device::cuda(0));
      gpu_list.push_back(&gpu[k]);
    }
    for (int step = 0; step < 3; ++step) {
      for (Param& p : cpu) cpu_solver.update(p);
      gpu_solver.update_all(gpu_list);
    }
    for (size_t k = 0; k < cpu.size(); ++k) {
      Tensor back = gpu[k].value.to(Device{});
      for (int64_t i = 0; i < back.numel(); ++i)
        ASSERT_NEAR(back[i], cpu[k].value[i], 1e-6 * std::max(1.f, std::abs(cpu[k].value[i]))) << cpu[k].name << "[" << i << "]";
    }
  }
}

TEST(CudaFiniteCheck, FindsTheFirstNaN) {
  POSEIDON_SKIP_WITHOUT_GPU();
  Tensor host({5000});
  host[1234] = std::nanf("");
  host[4000] = INFINITY;
  Tensor gpu = host.to(Device::cuda(0));
  EXPECT_EQ(device_memory::gpu_first_non_finite(gpu.device(), gpu.data(), gpu.numel()), 1234);
  host[1234] = 0.f;
  host[4000] = 0.f;
  gpu.copy_from(host);
  EXPECT_EQ(device_memory::gpu_first_non_finite(gpu.device(), gpu.data(), gpu.numel()), -1);
}

TEST(CudaStaging, DownloadThenUploadRoundTrips) {
  POSEIDON_SKIP_WITHOUT_GPU();
  Tensor host({4096});
  for (int64_t i = 0; i < host.numel(); ++i) host[i] = static_cast<float>(i) - 7.f;
  Tensor gpu = host.to(Device::cuda(0));
  Tensor landed({4096}), back({4096});
  StagingStreams streams(Device::cuda(0));
  streams.pin(landed.data(), 4096 * sizeof(float));
  streams.wait(streams.download({{landed.data(), gpu.data(), 4096}}));
  for (int64_t i = 0; i < 4096; ++i) ASSERT_EQ(landed[i], host[i]) << i;
  for (int64_t i = 0; i < 4096; ++i) landed[i] *= 2.f;
  streams.upload({{gpu.data(), landed.data(), 4096}});
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
}  // namespace poseidon
