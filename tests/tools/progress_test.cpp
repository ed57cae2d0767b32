// What a training run reports about its speed and its end: the progress
// line's rate covers exactly the display interval (training time only, tests
// and checkpoints left out), the summary's totals and steady rate, the
// summary block and record, the share of time spent waiting for data, and
// the readable units they print in. (A run
// whose iterations take a known time reports that rate: emulate_compute_test.)
#include "tools/cli/progress.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/cli/run_summary.h"
#include "core/units.h"

namespace poseidon {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  double now = 100;
  Progress::Clock clock() {
    return [this] { return now; };
  }
};

TEST(Progress, RateCoversTheWholeDisplayInterval) {
  FakeClock t;
  Progress p(0, 12, 4, /*quiet=*/true, t.clock());
  // Iterations 1-4 of 10 images: 1, 1, 1 and 5 seconds. The interval's rate
  // is 40 images / 8 s; the last second alone would say 2 img/s.
  for (double seconds : {1.0, 1.0, 1.0, 5.0}) {
    t.now += seconds;
    p.step(static_cast<int64_t>(t.now), 0, 1.f, 0.1, 10);
  }
  EXPECT_DOUBLE_EQ(p.images_per_sec(), 5.0);
}

TEST(Progress, PausedTimeIsNotTrainingTime) {
  FakeClock t;
  Progress p(0, 8, 4, true, t.clock());
  for (int64_t i = 1; i <= 4; ++i) {
    t.now += 2;
    p.step(i, 0, 1.f, 0.1, 10);
  }
  EXPECT_DOUBLE_EQ(p.images_per_sec(), 5.0);
  p.pause();  // a test of 100 s, with a checkpoint of 50 s inside it (pauses nest)
  t.now += 50;
  p.pause();
  t.now += 50;
  p.resume();
  p.resume();
  for (int64_t i = 5; i <= 8; ++i) {
    t.now += 1;
    p.step(i, 0, 1.f, 0.1, 10);
  }
  EXPECT_DOUBLE_EQ(p.images_per_sec(), 10.0);  // 40 images in 4 s of training

  const TrainingTotals totals = p.totals();
  EXPECT_EQ(totals.images, 80);
  EXPECT_DOUBLE_EQ(totals.wall_s, 112.0);
  EXPECT_DOUBLE_EQ(totals.train_s, 12.0);
  // Steady: after the first display interval.
  EXPECT_EQ(totals.steady_from_iter, 5);
  EXPECT_EQ(totals.steady_images, 40);
  EXPECT_DOUBLE_EQ(totals.steady_s, 4.0);
}

TEST(Progress, ARunShorterThanAnIntervalIsAllSteady) {
  FakeClock t;
  Progress p(10, 100, 50, true, t.clock());  // resumed at iteration 10, stopped at 13
  for (int64_t i = 11; i <= 13; ++i) {
    t.now += 2;
    p.step(i, 0, 1.f, 0.1, 4);
  }
  EXPECT_DOUBLE_EQ(p.images_per_sec(), 2.0);
  const TrainingTotals totals = p.totals();
  EXPECT_EQ(totals.steady_from_iter, 11);
  EXPECT_EQ(totals.steady_images, 12);
  EXPECT_DOUBLE_EQ(totals.steady_s, 6.0);
}

TEST(Progress, LineAndSummaryShowTheShareOfTimeWaitingForData) {
  FakeClock t;
  Progress p(0, 8, 4, /*quiet=*/false, t.clock());
  ::testing::internal::CaptureStderr();
  // Iterations of 2 s; in the first interval 0.5 s of each is spent waiting
  // for data, in the second 1.5 s.
  for (int64_t i = 1; i <= 8; ++i) {
    t.now += 2;
    p.add_data_wait(i <= 4 ? 0.5 : 1.5);
    p.step(i, 0, 1.f, 0.1, 10);
  }
  const std::string lines = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(lines.find("iter 4/8"), std::string::npos) << lines;
  EXPECT_NE(lines.find("data wait 25%"), std::string::npos) << lines;
  EXPECT_NE(lines.find("data wait 75%"), std::string::npos) << lines;
  const TrainingTotals totals = p.totals();
  EXPECT_DOUBLE_EQ(totals.data_wait_s, 8.0);
  const nlohmann::json r = RunSummary().record(totals);
  EXPECT_DOUBLE_EQ(r["data_wait_share"].get<double>(), 0.5);
  std::string block;
  for (const std::string& line : RunSummary::lines(r)) block += line + "\n";
  EXPECT_NE(block.find("data wait    50% of the training time waiting for the data loader (8.00 s)"),
            std::string::npos)
      << block;
}

TEST(RunSummary, RecordAndBlockHoldFinalAndBestResults) {
  RunSummary s;
  s.add_test(50, 0.9, {{"accuracy", 0.70}});
  s.add_test(100, 0.6, {{"accuracy", 0.82}});
  s.add_test(150, 0.7, {{"accuracy", 0.80}});
  s.add_checkpoint("runs/x/final.safetensors");
  TrainingTotals t;
  t.first_iter = 0;
  t.last_iter = 150;
  t.images = 4800;
  t.wall_s = 192;
  t.train_s = 150;
  t.steady_from_iter = 11;
  t.steady_images = 4480;
  t.steady_s = 140;
  const nlohmann::json r = s.record(t);
  EXPECT_EQ(r["type"], "summary");
  EXPECT_DOUBLE_EQ(r["images_per_sec_mean"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(r["images_per_sec_steady"].get<double>(), 32.0);
  EXPECT_EQ(r["test"]["final"]["iter"], 150);
  EXPECT_DOUBLE_EQ(r["test"]["final"]["accuracy"].get<double>(), 0.80);
  EXPECT_EQ(r["test"]["best"]["accuracy"]["iter"], 100);
  EXPECT_EQ(r["test"]["best"]["loss"]["iter"], 100);
  EXPECT_EQ(r["checkpoints"], nlohmann::json::array({"runs/x/final.safetensors"}));

  std::string block;
  for (const std::string& line : RunSummary::lines(r)) block += line + "\n";
  for (const char* phrase : {"3m12s (wall)", "25.0 img/s mean", "32.0 img/s steady (iterations 11-150",
                             "accuracy 0.82 (iter 100)", "runs/x/final.safetensors"})
    EXPECT_NE(block.find(phrase), std::string::npos) << phrase << " not in:\n" << block;
}

TEST(RunSummary, SaysWhyThereIsNoCheckpointAndNoTest) {
  RunSummary s;
  s.set_no_final_checkpoint("train.final_checkpoint is false");
  std::string block;
  for (const std::string& line : RunSummary::lines(s.record(TrainingTotals{}))) block += line + "\n";
  EXPECT_NE(block.find("checkpoints  none (train.final_checkpoint is false)"), std::string::npos) << block;
  EXPECT_NE(block.find("test         none"), std::string::npos) << block;
}

TEST(Units, ReadableWithoutExponents) {
  EXPECT_EQ(human_seconds(4.82e3 * 1e-3), "4.82 s");
  EXPECT_EQ(human_seconds(0.0123), "12.3 ms");
  EXPECT_EQ(human_seconds(0.9999), "1.00 s");
  EXPECT_EQ(human_seconds(850e-6), "850 us");
  EXPECT_EQ(human_seconds(0), "0 s");
  EXPECT_EQ(human_seconds(185), "3m05s");
  EXPECT_EQ(human_seconds(7620), "2h07m");
  EXPECT_EQ(human_bytes(1.37e9), "1.37 GB");
  EXPECT_EQ(human_bytes(455e3), "455 kB");
  EXPECT_EQ(human_bytes(12), "12 B");
  EXPECT_EQ(human_number(4826.4), "4826");
  EXPECT_EQ(human_number(9.996), "10.0");
  EXPECT_EQ(human_number(0.52), "0.52");
}

}  // namespace
}  // namespace poseidon
