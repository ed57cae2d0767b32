// The CUDA backend's own pieces: that it is built wherever nvcc is, and on a
// GPU that tensors round-trip, the caching allocator reuses blocks (a
// training step allocates nothing from the driver after the first), and the
// solver's update and the finite check agree with the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

#include "core/bf16.h"
#include "core/config_node.h"
#include "core/device_memory.h"
#include "core/finite_check.h"
#include "core/local_sink.h"
#include "core/net.h"
#include "core/solver.h"
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
  Solver solver(
      SolverConfig::parse(ConfigNode::parse("{lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}", "solver")));
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
  // The same element function, each product and sum rounded on both (no
  // fused multiply-adds: CMakeLists.txt): the same bits.
  Tensor back = gpu.value.to(Device{});
  for (int64_t i = 0; i < 257; ++i) EXPECT_EQ(float_bits(back[i]), float_bits(cpu.value[i])) << i;
}

// Solver::update_all's launches per group of parameters (core/
// update_groups.h) against the CPU's per-parameter update, over more
// parameters than one group holds, in each rule that keeps state.
TEST(CudaSolver, UpdateAllMatchesTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (const char* config :
       {"{lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}", "{type: adamw, lr: 0.01, weight_decay: 0.1}",
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
        ASSERT_EQ(float_bits(back[i]), float_bits(cpu[k].value[i])) << cpu[k].name << "[" << i << "]";
    }
  }
}

// The one-launch update (device_memory::gpu_update_table) against its host
// reference (apply_update_table): a raised finite-guard flag leaves every
// value and state slot as it was, bit for bit; with the flag lowered,
// three steps whose learning rates differ, sent through the same upload
// (its pinned slots in turn), give the host's numbers.
TEST(CudaUpdateTable, FlagKeepsEverythingAndStepsMatchTheHost) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const int params = 40;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<Tensor> host_value, host_grad, host_state, value, grad, state;
  for (int k = 0; k < params; ++k) {
    const int64_t n = k % 9 == 4 ? 0 : int64_t(k * 577 % 2003 + 1);
    host_value.emplace_back(Shape{n});
    host_grad.emplace_back(Shape{n});
    host_state.emplace_back(Shape{2 * n});
    for (int64_t i = 0; i < n; ++i) host_value[k][i] = uni(rng), host_grad[k][i] = uni(rng);
    for (int64_t i = 0; i < 2 * n; ++i) host_state[k][i] = std::abs(uni(rng));
    value.push_back(host_value[k].to(Device::cuda(0)));
    grad.push_back(host_grad[k].to(Device::cuda(0)));
    state.push_back(host_state[k].to(Device::cuda(0)));
  }
  auto step_for = [](int k, int step) {
    UpdateStep s;
    s.rule = UpdateRule::adam;
    s.lr = 0.01f * float(1 + (k + step) % 3);
    s.decay = k % 2 ? 1e-3f : 0.f;
    s.beta1 = 0.9f, s.one_minus_beta1 = 0.1f, s.beta2 = 0.999f, s.one_minus_beta2 = 0.001f;
    s.bias_correction2_sqrt = 0.05f * float(step + 1);
    s.eps = 1e-8f;
    return s;
  };
  auto tables = [&](int step) {
    std::vector<UpdateSlice> on_host, on_device;
    for (int k = 0; k < params; ++k) {
      const int64_t n = host_value[k].numel();
      add_update_slice(on_host, step_for(k, step), host_value[k].data(), host_grad[k].data(), host_state[k].data(), n);
      add_update_slice(on_device, step_for(k, step), value[k].data(), grad[k].data(), state[k].data(), n);
    }
    return std::pair{on_host, on_device};
  };
  device_memory::StepUpload upload(Device::cuda(0), params * sizeof(UpdateSlice));
  Tensor flag = Tensor({1}, Device{});
  flag[0] = 1.f;
  Tensor raised = flag.to(Device::cuda(0));
  auto [unused, raised_table] = tables(0);
  device_memory::gpu_update_table(upload, raised_table.data(), params, raised.data());
  for (int k = 0; k < params; ++k) {
    ASSERT_EQ(std::memcmp(value[k].to(Device{}).data(), host_value[k].data(), host_value[k].numel() * 4), 0) << k;
    ASSERT_EQ(std::memcmp(state[k].to(Device{}).data(), host_state[k].data(), host_state[k].numel() * 4), 0) << k;
  }
  flag[0] = 0.f;
  Tensor lowered = flag.to(Device::cuda(0));
  for (int step = 1; step <= 3; ++step) {
    auto [on_host, on_device] = tables(step);
    apply_update_table(on_host.data(), params, nullptr, 1);
    device_memory::gpu_update_table(upload, on_device.data(), params, step == 2 ? nullptr : lowered.data());
  }
  for (int k = 0; k < params; ++k) {
    const Tensor back = value[k].to(Device{}), back_state = state[k].to(Device{});
    for (int64_t i = 0; i < back.numel(); ++i)
      ASSERT_EQ(float_bits(back[i]), float_bits(host_value[k][i])) << k << "[" << i << "]";
    for (int64_t i = 0; i < back_state.numel(); ++i)
      ASSERT_EQ(float_bits(back_state[i]), float_bits(host_state[k][i])) << k << " state[" << i << "]";
  }
}

// Updates sent while a long stretch of the compute stream's work is still
// queued (as a bucket's update is sent while backward runs) take new pinned
// slots rather than the host waiting for that work, and each launch still
// reads its own table: twelve momentum steps give the host's numbers.
TEST(CudaUpdateTable, SendsBehindQueuedWorkTakeNewSlots) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  const int64_t n = 1000;
  Tensor host_value({n}), host_grad({n}), host_state({n});
  for (int64_t i = 0; i < n; ++i) host_value[i] = 0.001f * float(i), host_grad[i] = 1.f - 0.002f * float(i);
  Tensor value = host_value.to(gpu), grad = host_grad.to(gpu), state = host_state.to(gpu);
  Tensor busy({int64_t(1) << 26}, gpu);  // 256 MiB
  device_memory::StepUpload upload(gpu, sizeof(UpdateSlice));
  device_memory::synchronize(gpu);
  // Tens of milliseconds of GPU work, queued and not waited for.
  for (int pass = 0; pass < 128; ++pass) busy.fill(float(pass));
  const int sends = 12;
  for (int k = 0; k < sends; ++k) {
    UpdateStep step;
    step.lr = 0.01f * float(k + 1);
    step.momentum = 0.9f;
    std::vector<UpdateSlice> on_host, on_device;
    add_update_slice(on_host, step, host_value.data(), host_grad.data(), host_state.data(), n);
    add_update_slice(on_device, step, value.data(), grad.data(), state.data(), n);
    apply_update_table(on_host.data(), 1, nullptr, 1);
    device_memory::gpu_update_table(upload, on_device.data(), 1);
  }
  EXPECT_GT(upload.slot_count(), size_t(4)) << "the sends waited for the queued fills instead of taking new slots";
  const Tensor back = value.to(Device{}), back_state = state.to(Device{});
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(float_bits(back[i]), float_bits(host_value[i])) << i;
    ASSERT_EQ(float_bits(back_state[i]), float_bits(host_state[i])) << "state[" << i << "]";
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

}  // namespace
}  // namespace poseidon
