// Which training steps run as a CUDA graph (core/capture_schedule.h) and the
// host work recorded around a captured step (core/step_recording.h): plain
// C++, checked here without a GPU. The config's word for the mode, the
// reason given for each run that cannot be captured, the warm-up before a
// capture, replays after it, a warm-up again after a restart, and never a
// capture again after one failed; recorded work runs in the order recorded,
// told whether it must work its numbers out again.
#include "core/capture_schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/step_recording.h"

namespace poseidon {
namespace {

TEST(CudaGraphMode, ParsesAutoAndOffOnly) {
  EXPECT_EQ(parse_cuda_graph_mode("auto"), CudaGraphMode::automatic);
  EXPECT_EQ(parse_cuda_graph_mode("off"), CudaGraphMode::off);
  try {
    parse_cuda_graph_mode("on");
    FAIL() << "'on' was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected auto or off, found 'on'"), std::string::npos) << e.what();
  }
}

CaptureFacts eligible() {
  CaptureFacts f;
  f.on_gpu = true;
  f.reads_late = true;
  return f;
}

TEST(CaptureEligibility, SaysWhyEachRunIsNotCaptured) {
  EXPECT_EQ(why_uncaptured(eligible()), "");
  auto why = [](auto change) {
    CaptureFacts f = eligible();
    change(f);
    return why_uncaptured(f);
  };
  EXPECT_EQ(why([](CaptureFacts& f) { f.mode = CudaGraphMode::off; }), "cuda_graph is off");
  EXPECT_EQ(why([](CaptureFacts& f) { f.on_gpu = false; }), "the net is not on a GPU");
  EXPECT_NE(why([](CaptureFacts& f) { f.distributed = true; }).find("distributed run"), std::string::npos);
  EXPECT_NE(why([](CaptureFacts& f) { f.emulated = true; }).find("emulated"), std::string::npos);
  EXPECT_NE(why([](CaptureFacts& f) { f.traced = true; }).find("timeline"), std::string::npos);
  EXPECT_NE(why([](CaptureFacts& f) { f.reads_late = false; }).find("solver.check_finite is false"), std::string::npos);
  EXPECT_EQ(why([](CaptureFacts& f) {
              f.uncapturable_layers = {"norm1 (my_norm)", "mix (my_mix)"};
            }),
            "layers that cannot be captured (a CPU layer in a GPU net, or one that says so): norm1 (my_norm), mix (my_mix)");
}

std::vector<StepMode> take(CaptureSchedule& s, int n) {
  std::vector<StepMode> modes;
  for (int i = 0; i < n; ++i) modes.push_back(s.next());
  return modes;
}

const StepMode P = StepMode::plain, C = StepMode::capture, R = StepMode::replay;

TEST(CaptureSchedule, WarmsUpThenCapturesOnceThenReplays) {
  static_assert(CaptureSchedule::kWarmupSteps == 3);
  CaptureSchedule s(true);
  EXPECT_EQ(take(s, 4), (std::vector<StepMode>{P, P, P, C}));
  s.captured();
  EXPECT_TRUE(s.has_graph());
  EXPECT_EQ(take(s, 3), (std::vector<StepMode>{R, R, R}));
}

TEST(CaptureSchedule, RestartWarmsUpAndCapturesAgain) {
  CaptureSchedule s(true);
  take(s, 4);
  s.captured();
  s.next();
  s.restart();
  EXPECT_FALSE(s.has_graph());
  EXPECT_EQ(take(s, 4), (std::vector<StepMode>{P, P, P, C}));
  s.captured();
  EXPECT_EQ(s.next(), R);
}

TEST(CaptureSchedule, AFailedCaptureLeavesEveryLaterStepPlain) {
  CaptureSchedule s(true);
  take(s, 4);
  s.failed();
  EXPECT_EQ(take(s, 5), (std::vector<StepMode>(5, P)));
  s.restart();
  EXPECT_EQ(take(s, 5), (std::vector<StepMode>(5, P)));
}

TEST(CaptureSchedule, AnIneligibleRunIsAlwaysPlain) {
  CaptureSchedule s(false);
  EXPECT_EQ(take(s, 6), (std::vector<StepMode>(6, P)));
}

TEST(CaptureSchedule, ACaptureMustBeReported) {
  CaptureSchedule s(true);
  take(s, 4);
  EXPECT_THROW(s.next(), InternalError);
  CaptureSchedule plain(true);
  EXPECT_THROW(plain.captured(), InternalError);
  EXPECT_THROW(plain.failed(), InternalError);
}

TEST(StepRecording, IsActiveOnlyWhileStarted) {
  EXPECT_EQ(StepRecording::active(), nullptr);
  StepRecording r;
  r.start();
  EXPECT_EQ(StepRecording::active(), &r);
  StepRecording other;
  EXPECT_THROW(other.start(), InternalError);
  r.stop();
  EXPECT_EQ(StepRecording::active(), nullptr);
  {
    StepRecording gone;
    gone.start();
  }
  EXPECT_EQ(StepRecording::active(), nullptr) << "a destroyed recording stays active";
}

TEST(StepRecording, RunsItsWorkInOrderAndWorksNumbersOutAgainAfterTheFirstLaunch) {
  StepRecording r;
  std::vector<std::string> log;
  r.before_launch([&](bool again) { log.push_back(again ? "seed drawn" : "seed sent"); });
  r.before_launch([&](bool again) { log.push_back(again ? "table made" : "table sent"); });
  r.after_launch([&] { log.push_back("status fetched"); });
  EXPECT_FALSE(r.empty());
  r.run_before();
  r.run_after();
  r.run_before();
  r.run_after();
  EXPECT_EQ(log, (std::vector<std::string>{"seed sent", "table sent", "status fetched", "seed drawn", "table made",
                                           "status fetched"}));
  r.clear();
  EXPECT_TRUE(r.empty());
  log.clear();
  r.before_launch([&](bool again) { log.push_back(again ? "again" : "first"); });
  r.run_before();
  EXPECT_EQ(log, (std::vector<std::string>{"first"})) << "clear() forgets the launches too";
}

}  // namespace
}  // namespace poseidon
