// The end of a run in one block: wall time, mean and steady img/s, final and
// best test results, the checkpoints written. The same numbers go to
// metrics.jsonl as a record of type "summary", from which the block is drawn.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/cli/progress.h"

namespace poseidon {

class RunSummary {
 public:
  void add_test(int64_t iter, double loss, const std::map<std::string, double>& metrics);
  void add_checkpoint(const std::string& path) { checkpoints_.push_back(path); }
  // Why no final checkpoint was written, when none was (shown with the list).
  void set_no_final_checkpoint(const std::string& why) { no_final_ = why; }

  // The "summary" record of metrics.jsonl.
  nlohmann::json record(const TrainingTotals& totals) const;
  // The block printed at the end of a run, drawn from record().
  static std::vector<std::string> lines(const nlohmann::json& record);

 private:
  struct Best {
    int64_t iter = 0;
    double value = 0;
  };
  nlohmann::json last_test_;
  std::map<std::string, Best> best_;  // "loss" lowest; every metric (accuracy) highest
  std::vector<std::string> checkpoints_;
  std::string no_final_;
};

}  // namespace poseidon
