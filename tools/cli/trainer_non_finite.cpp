// What the Trainer does when an iteration turns non-finite: run it again
// where the late read cannot say at once where it turned (a GPU), then stop,
// naming the iteration and saving the state before it where that state is
// finite.
#include <cmath>
#include <filesystem>

#include "core/checkpoint.h"
#include "core/finite_check.h"
#include "core/local_sink.h"
#include "tools/cli/trainer.h"

namespace poseidon {

void Trainer::stop_non_finite(const std::string& what, int64_t epoch, const LoaderPosition& pos,
                              const std::mt19937_64& rng) {
  const std::string at =
      config_.file + ": iteration " + std::to_string(iter_ + 1) + " (epoch " + std::to_string(epoch) + "): " + what;
  if (session_)
    throw Error(at + " on rank " + std::to_string(rank_) +
                "; no checkpoint written (every rank stops; --resume from the last snapshot)");
  // The parameters are those before this iteration, but an update can itself
  // overflow (lr * gradient beyond float range): such a state is not worth saving.
  if (auto bad_value = find_non_finite_value(*net_))
    throw Error(at + "; no checkpoint written: the " + bad_value->describe("parameters are already non-finite") +
                " (try a lower solver.lr)");
  const std::string path = checkpoint_path("iter_" + std::to_string(iter_));
  std::filesystem::create_directories(config_.output_dir);
  save_checkpoint(path, *net_, solver_.get(), checkpoint_metadata(iter_, pos, rng));
  throw Error(at + "; the state before this iteration is saved in " + path + " (--resume repeats it from there)");
}

std::string Trainer::repeat_non_finite(const Step& s, const Tensor& before, LocalGradSink& held,
                                       bool later_issued) {
  // The net's blobs and gradients may be those of the iteration issued after
  // it, which never counts: its label check is not reported.
  if (later_issued) try {
      net_->check_forward();
    } catch (const Error&) {
    }
  train_loader_->seek(s.position);
  next_train_batch();
  std::mt19937_64 rng = s.rng_before;
  RunContext ctx{Phase::train, &rng, config_.device};
  const float loss = net_->forward(ctx);
  std::string what;
  if (!std::isfinite(loss)) {
    what = describe_non_finite_loss(loss, *net_);
  } else {
    net_->backward(ctx, held);
    held.discard_held();
    if (auto bad = find_non_finite_gradient(*net_)) what = bad->describe("non-finite gradient");
  }
  net_->flat_buffers().copy_from(before);  // this forward moved the running statistics again
  if (what.empty())  // a GPU's nondeterministic sums came out finite this time
    what = (std::isfinite(s.loss) ? std::string("non-finite gradient")
                                  : "non-finite loss (" + non_finite_text(s.loss) + ")") +
           " (finite when the iteration ran again)";
  return what;
}

}  // namespace poseidon
