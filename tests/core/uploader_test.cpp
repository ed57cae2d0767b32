// Input batches through pinned double buffers (device_memory::Uploader):
// every batch reaches the GPU tensor bit for bit, whatever the compute
// stream is still doing, and a steady-state training iteration as the
// trainer runs it alone (both inputs uploaded, forward and backward queued,
// the step's finite guard and held updates, the previous iteration read
// late) makes no host wait and no GPU memory request: counted
// (device_memory::device_counts) over three iterations after three warm-up ones.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/device_pipeline.h"
#include "core/step_gate.h"
#include "gpu_required.h"

namespace poseidon {
namespace {

constexpr const char* kModel = R"(name: steady
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 6, kernel_size: 3, pad: 1}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, mode: max, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 16}
  - {name: drop1, type: dropout, ratio: 0.3}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

TEST(CudaUploader, EveryBatchArrivesAndASteadyIterationNeitherWaitsNorAllocates) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  Net net(ConfigNode::parse(kModel, "model.yaml"), 8, gpu);
  net.fuse_relus();
  net.init_params(2);
  Solver solver(SolverConfig::parse(ConfigNode::parse("{lr: 0.01, momentum: 0.9}", "solver")));
  LocalGradSink held(solver, true);
  StepGate gate(net, solver);
  Tensor& data = net.blob("data").value;
  Tensor& labels = net.blob("label").value;
  // Four host batches, taken in turn.
  std::vector<Tensor> batches, batch_labels;
  std::mt19937_64 draw(6);
  std::normal_distribution<float> normal;
  for (int b = 0; b < 4; ++b) {
    batches.emplace_back(data.shape());
    batch_labels.emplace_back(labels.shape());
    for (int64_t i = 0; i < batches[b].numel(); ++i) batches[b][i] = normal(draw);
    for (int64_t i = 0; i < batch_labels[b].numel(); ++i) batch_labels[b][i] = float((i + b) % 3);
  }
  device_memory::Uploader data_upload(gpu), labels_upload(gpu);
  Tensor buffers_before[2] = {Tensor(net.flat_buffers().shape(), gpu), Tensor(net.flat_buffers().shape(), gpu)};
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, gpu};
  bool all_finite = true;
  int64_t iter = 0;
  auto iteration = [&] {
    const int b = int(iter % 4);
    buffers_before[iter % 2].copy_from(net.flat_buffers());
    data_upload.upload(data.data(), batches[b].data(), size_t(data.numel()));
    labels_upload.upload(labels.data(), batch_labels[b].data(), size_t(labels.numel()));
    solver.set_iteration(iter);
    net.run_forward(ctx);
    net.backward(ctx, held);
    gate.close(int(iter % 2), held);
    if (iter > 0) {
      net.check_forward();
      all_finite = all_finite && gate.read(int((iter - 1) % 2)).finite;
    }
    ++iter;
  };
  for (int k = 0; k < 3; ++k) iteration();
  const device_memory::DeviceCounts before = device_memory::device_counts(gpu);
  for (int k = 0; k < 3; ++k) iteration();
  const device_memory::DeviceCounts after = device_memory::device_counts(gpu);
  EXPECT_EQ(after.host_waits - before.host_waits, 0) << "host waits in 3 steady iterations";
  EXPECT_EQ(after.allocations - before.allocations, 0) << "GPU memory requests in 3 steady iterations";
  EXPECT_EQ(after.driver_allocations - before.driver_allocations, 0) << "cudaMalloc calls in 3 steady iterations";
  EXPECT_TRUE(all_finite);
  // The last iteration's inputs are those of its batch, bit for bit.
  const int b = int((iter - 1) % 4);
  Tensor got = data.to(Device{}), got_labels = labels.to(Device{});
  EXPECT_EQ(0, std::memcmp(got.data(), batches[b].data(), got.numel() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(got_labels.data(), batch_labels[b].data(), got_labels.numel() * sizeof(float)));
}

TEST(CudaUploader, CountsTheWaitsOfAPageableCopy) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  Tensor host({1000}), device({1000}, gpu);
  const device_memory::DeviceCounts before = device_memory::device_counts(gpu);
  device.copy_from(host);
  host.copy_from(device);
  EXPECT_EQ(device_memory::device_counts(gpu).host_waits - before.host_waits, 2);
}

}  // namespace
}  // namespace poseidon
