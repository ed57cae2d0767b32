// The gradients verb: one forward and backward on the first batch training
// would take (data.train's loader, the config's seed), from given weights,
// every learnable parameter's gradient written to a safetensors file under
// the parameter's name. What a training step computes, made visible for
// comparison with another implementation (the Python package, PyTorch).
#include <cstdio>

#include "core/checkpoint.h"
#include "core/math.h"
#include "core/safetensors.h"
#include "tools/cli/commands.h"
#include "tools/cli/trainer.h"

namespace poseidon {

namespace {
// Leaves every gradient in its Param: nothing is applied.
class KeepGradients : public GradSink {
 public:
  void grad_ready(Param&) override {}
};
}  // namespace

int cmd_gradients(const GradientsArgs& args) {
  TrainConfig config = TrainConfig::load(args.config, args.overrides);
  set_num_threads(config.threads);
  Net net(config.model, config.train_data.batch_size, config.device);
  net.set_precision(config.precision);
  net.init_params(config.seed);
  net.fuse_relus();  // as training runs it
  if (!args.weights.empty()) load_checkpoint(args.weights, net, nullptr);
  auto source = make_source(config.train_data.node, config.base_dir);
  check_sample_shape(net, *source, config.train_data.node);
  LoaderConfig lc;
  lc.batch_size = config.train_data.batch_size;
  lc.shuffle = config.train_data.shuffle;
  lc.seed = config.seed;
  lc.drop_last = true;
  read_loader_keys(config.train_data.node, lc);
  Loader loader(source, lc);
  Tensor staged_data, staged_labels;
  feed_batch(net, loader, staged_data, staged_labels);
  std::mt19937_64 rng(config.seed);
  RunContext ctx{Phase::train, &rng, config.device};
  const float loss = net.forward(ctx);
  KeepGradients keep;
  net.backward(ctx, keep);
  std::vector<Tensor> host;  // the gradients on the host, for the writer
  std::vector<std::string> names;
  for (Param* p : net.params())
    if (p->learnable) host.push_back(p->grad.to(Device{})), names.push_back(p->name);
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (size_t i = 0; i < host.size(); ++i) entries.emplace_back(names[i], &host[i]);
  char loss_text[32];
  std::snprintf(loss_text, sizeof loss_text, "%.9g", loss);
  write_safetensors(args.output, entries, {{"format", "poseidon-gradients-1"}, {"loss", loss_text}});
  std::printf("loss %s; %zu gradients written to %s\n", loss_text, entries.size(), args.output.c_str());
  return 0;
}

}  // namespace poseidon
