// Checkpoints of a small Net: what is saved under which name, that loading
// restores parameters, buffers, solver state and metadata exactly, and that
// a checkpoint which does not fit the model is refused without changing it.
#include "core/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/registry.h"
#include "core/safetensors.h"

namespace poseidon::testing {
namespace {

namespace fs = std::filesystem;

std::string tiny_model(int hidden) {
  return "name: tiny\n"
         "inputs: {data: [4], label: []}\n"
         "layers:\n"
         "  - {name: fc1, type: fc, num_output: " +
         std::to_string(hidden) +
         "}\n"
         "  - {name: bn1, type: batch_norm}\n"
         "  - {name: relu1, type: relu}\n"
         "  - {name: fc2, type: fc, num_output: 2}\n"
         "  - {name: loss, type: softmax_loss, inputs: [fc2, label]}\n";
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* type : {"fc", "batch_norm", "relu", "softmax_loss"})
      if (!LayerRegistry::instance().find(type)) GTEST_SKIP() << "layer type '" << type << "' is not built in";
    std::string pattern = (fs::temp_directory_path() / "checkpoint_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static std::unique_ptr<Net> make_net(uint64_t seed, int hidden = 3) {
    auto net = std::make_unique<Net>(ConfigNode::parse(tiny_model(hidden), "tiny.yaml"), 2);
    net->init_params(seed);
    // Buffers get values an initialiser would never produce.
    float v = 0.25f * static_cast<float>(seed);
    for (Param* p : net->params())
      if (!p->learnable)
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value[i] = v += 0.5f;
    return net;
  }

  // One SGD step from made-up gradients, so the solver has momentum buffers.
  static void step(Net& net, Solver& solver, float grad_scale) {
    for (Param* p : net.params()) {
      if (!p->learnable) continue;
      for (int64_t i = 0; i < p->grad.numel(); ++i) p->grad[i] = grad_scale * (1.f + static_cast<float>(i % 5));
      solver.update(*p);
    }
  }

  static SolverConfig sgd() {
    SolverConfig c;
    c.momentum = 0.9;
    c.weight_decay = 5e-4;
    c.lr.base_lr = 0.1;
    return c;
  }

  static std::vector<float> values(const Tensor& t) { return {t.data(), t.data() + t.numel()}; }

  static void expect_same_params(Net& a, Net& b) {
    for (Param* p : a.params()) {
      Param* q = b.find_param(p->name);
      ASSERT_NE(q, nullptr) << p->name;
      EXPECT_EQ(values(p->value), values(q->value)) << p->name;
    }
  }

  // The message of the Error that loading `path` into a fresh net raises.
  std::string load_error(const std::string& path, Solver* solver = nullptr) {
    auto net = make_net(9);
    try {
      load_checkpoint(path, *net, solver);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loaded " << path << " without error";
    return "";
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, SavesPyTorchNamesAndLayouts) {
  auto net = make_net(1);
  Solver solver(sgd());
  step(*net, solver, 0.1f);
  std::string path = file("names.safetensors");
  save_checkpoint(path, *net, &solver, {{"iteration", "1"}});

  SafetensorsFile f = read_safetensors(path);
  std::set<std::string> names;
  for (const auto& [name, t] : f.tensors) names.insert(name);
  std::set<std::string> expected = {"fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                    "bn1.running_var", "fc2.weight", "fc2.bias"};
  for (const char* learnable : {"fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias", "fc2.weight", "fc2.bias"})
    expected.insert(std::string("optimizer.") + learnable + ".momentum_buffer");
  EXPECT_EQ(names, expected);
  EXPECT_EQ(f.tensors.at("fc1.weight").shape, (Shape{3, 4}));  // [out, in]
  EXPECT_EQ(f.tensors.at("fc2.weight").shape, (Shape{2, 3}));
  EXPECT_EQ(f.tensors.at("optimizer.fc2.weight.momentum_buffer").data,
            values(solver.state().at("fc2.weight")));
  EXPECT_EQ(f.metadata.at("iteration"), "1");
}

TEST_F(CheckpointTest, RoundTripResumesWithTheSameNumbers) {
  auto saved = make_net(1);
  Solver saved_solver(sgd());
  step(*saved, saved_solver, 0.1f);
  std::string path = file("rt.safetensors");
  std::map<std::string, std::string> meta = {{"iteration", "1"}, {"loader", "64"}};
  save_checkpoint(path, *saved, &saved_solver, meta);

  auto loaded = make_net(2);
  Solver loaded_solver(sgd());
  // The caller's metadata comes back, with the list of the saved net's layers.
  std::map<std::string, std::string> with_layers = meta;
  with_layers[kLayersMetadata] = "fc1:fc,bn1:batch_norm,relu1:relu,fc2:fc,loss:softmax_loss";
  EXPECT_EQ(load_checkpoint(path, *loaded, &loaded_solver), with_layers);
  expect_same_params(*saved, *loaded);
  ASSERT_EQ(loaded_solver.state().size(), saved_solver.state().size());
  for (const auto& [name, buf] : saved_solver.state())
    EXPECT_EQ(values(loaded_solver.state().at(name)), values(buf)) << name;

  // The next step depends on the momentum: equal only if the state came back.
  step(*saved, saved_solver, -0.3f);
  step(*loaded, loaded_solver, -0.3f);
  expect_same_params(*saved, *loaded);
}

TEST_F(CheckpointTest, LoadsWithoutSolverAndIgnoresPyTorchExtras) {
  auto saved = make_net(1);
  Tensor counter(Shape{}), stray_state(Shape{7});
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (Param* p : saved->params()) entries.emplace_back(p->name, &p->value);
  entries.emplace_back("bn1.num_batches_tracked", &counter);
  entries.emplace_back("optimizer.fc9.weight.momentum_buffer", &stray_state);
  std::string path = file("torch.safetensors");
  write_safetensors(path, entries, {});

  auto loaded = make_net(2);
  EXPECT_TRUE(load_checkpoint(path, *loaded, nullptr).empty());
  expect_same_params(*saved, *loaded);
}

TEST_F(CheckpointTest, WrongShapeNamesTensorAndShapesAndChangesNothing) {
  auto wide = make_net(1, 5);
  std::string path = file("wide.safetensors");
  save_checkpoint(path, *wide, nullptr, {});

  auto net = make_net(3);
  auto untouched = make_net(3);
  try {
    load_checkpoint(path, *net, nullptr);
    FAIL() << "loaded a checkpoint of a wider model";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("fc1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5, 4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 4]"), std::string::npos) << msg;
  }
  expect_same_params(*net, *untouched);
}

TEST_F(CheckpointTest, MissingTensorIsNamed) {
  auto net = make_net(1);
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (Param* p : net->params())
    if (p->name != "bn1.running_var") entries.emplace_back(p->name, &p->value);
  std::string path = file("partial.safetensors");
  write_safetensors(path, entries, {});
  std::string msg = load_error(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("bn1.running_var"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, UnknownTensorIsListed) {
  auto net = make_net(1);
  Tensor extra({2, 2});
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (Param* p : net->params()) entries.emplace_back(p->name, &p->value);
  entries.emplace_back("conv9.weight", &extra);
  std::string path = file("extra.safetensors");
  write_safetensors(path, entries, {});
  std::string msg = load_error(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("conv9.weight"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, SolverStateMustMatchTheModel) {
  auto net = make_net(1);
  Tensor wrong_shape({4, 3}), buffer_state({3});
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (Param* p : net->params()) entries.emplace_back(p->name, &p->value);

  auto with = [&](const std::string& name, const Tensor* t) {
    auto e = entries;
    e.emplace_back(name, t);
    std::string path = file("state.safetensors");
    write_safetensors(path, e, {});
    return path;
  };
  Solver solver(sgd());
  std::string msg = load_error(with("optimizer.fc1.weight.momentum_buffer", &wrong_shape), &solver);
  EXPECT_NE(msg.find("optimizer.fc1.weight.momentum_buffer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 3]"), std::string::npos) << msg;
  msg = load_error(with("optimizer.bn1.running_mean.momentum_buffer", &buffer_state), &solver);
  EXPECT_NE(msg.find("not a learnable parameter"), std::string::npos) << msg;
  msg = load_error(with("optimizer.fc1.bias.exp_avg", &buffer_state), &solver);
  EXPECT_NE(msg.find("optimizer.fc1.bias.exp_avg"), std::string::npos) << msg;
  EXPECT_TRUE(solver.state().empty());
}

}  // namespace
}  // namespace poseidon::testing
