// `poseidon info`: the build's libraries and the GPUs it sees, and a clear
// refusal of GPU devices where there are none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/device_memory.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {

const std::string kRoot = POSEIDON_SOURCE_DIR;

TEST(InfoVerb, ReportsTheBuildAndTheGpus) {
  CliResult r = run_poseidon("info --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json info = nlohmann::json::parse(r.out);
  EXPECT_NE(info.at("MPI").get<std::string>().find("MPI"), std::string::npos) << info.at("MPI");
  EXPECT_NE(info.at("BLAS").get<std::string>().find("OpenBLAS"), std::string::npos);
  EXPECT_EQ(info.at("CUDA backend"), device_memory::cuda_built() ? "built" : "not built");
  if (device_memory::cuda_built()) {
    for (const char* lib : {"CUDA runtime", "cuDNN", "cuBLAS", "NCCL"})
      EXPECT_NE(info.at(lib).get<std::string>(), "none") << lib;
  }
  EXPECT_EQ(info.at("gpus").size(), static_cast<size_t>(device_memory::cuda_device_count()));
  if (device_memory::cuda_device_count() == 0) {
    EXPECT_FALSE(info.at("gpus_unavailable").get<std::string>().empty());
  }
}

TEST(InfoVerb, GpuDeviceWithoutAGpuIsAClearError) {
  if (device_memory::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  CliResult r = run_poseidon("time " + kRoot + "/models/lenet.yaml --device cuda --iters 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cuda:0"), std::string::npos) << r.err;
  CliResult bad = run_poseidon("time " + kRoot + "/models/lenet.yaml --device gpu --iters 1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("expected cpu, cuda or cuda:N"), std::string::npos) << bad.err;
}

}  // namespace poseidon::testing
