// The run summary block and its metrics record.
#include "tools/cli/run_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/units.h"

namespace poseidon {

namespace {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string rate(const nlohmann::json& images, const nlohmann::json& seconds) {
  const double s = seconds.get<double>();
  return s > 0 ? human_number(images.get<double>() / s) + " img/s" : "? img/s";
}

// "runs/x/iter_50.safetensors, runs/x/final.safetensors"; many: "12 in runs/x (iter_100 ... final)".
std::string checkpoint_list(const nlohmann::json& paths) {
  if (paths.size() <= 3) {
    std::string out;
    for (const auto& p : paths) out += (out.empty() ? "" : ", ") + p.get<std::string>();
    return out;
  }
  const auto name = [](const nlohmann::json& p) {
    return std::filesystem::path(p.get<std::string>()).filename().string();
  };
  return std::to_string(paths.size()) + " in " +
         std::filesystem::path(paths.back().get<std::string>()).parent_path().string() + " (" + name(paths.front()) +
         " ... " + name(paths.back()) + ")";
}
}  // namespace

void RunSummary::add_test(int64_t iter, double loss, const std::map<std::string, double>& metrics) {
  last_test_ = {{"iter", iter}, {"loss", loss}};
  const auto keep = [&](const std::string& name, double value, bool lower_is_better) {
    auto it = best_.find(name);
    if (it == best_.end() || (lower_is_better ? value < it->second.value : value > it->second.value))
      best_[name] = Best{iter, value};
  };
  keep("loss", loss, true);
  for (const auto& [name, value] : metrics) {
    last_test_[name] = value;
    keep(name, value, false);
  }
}

nlohmann::json RunSummary::record(const TrainingTotals& t) const {
  nlohmann::json r = {{"type", "summary"},
                      {"iterations", t.last_iter - t.first_iter},
                      {"first_iter", t.first_iter + 1},
                      {"last_iter", t.last_iter},
                      {"images", t.images},
                      {"wall_s", t.wall_s},
                      {"train_s", t.train_s},
                      {"data_wait_s", t.data_wait_s},
                      {"data_wait_share", t.train_s > 0 ? std::min(1.0, t.data_wait_s / t.train_s) : 0.0},
                      {"images_per_sec_mean", t.wall_s > 0 ? t.images / t.wall_s : 0.0},
                      {"images_per_sec_steady", t.steady_s > 0 ? t.steady_images / t.steady_s : 0.0},
                      {"steady_from_iter", t.steady_from_iter},
                      {"steady_images", t.steady_images},
                      {"steady_s", t.steady_s},
                      {"checkpoints", checkpoints_}};
  if (!no_final_.empty()) r["no_final_checkpoint"] = no_final_;
  if (!last_test_.is_null()) {
    nlohmann::json best = nlohmann::json::object();
    for (const auto& [name, b] : best_) best[name] = {{"iter", b.iter}, {"value", b.value}};
    r["test"] = {{"final", last_test_}, {"best", best}};
  }
  return r;
}

std::vector<std::string> RunSummary::lines(const nlohmann::json& r) {
  std::vector<std::string> out;
  out.push_back("run summary: iterations " + std::to_string(r["first_iter"].get<int64_t>()) + "-" +
                std::to_string(r["last_iter"].get<int64_t>()) + " in " + human_seconds(r["wall_s"].get<double>()) +
                " (wall)");
  const int64_t from = r["steady_from_iter"], last = r["last_iter"];
  const std::string steady_span = from == last ? "iteration " + std::to_string(last)
                                               : "iterations " + std::to_string(from) + "-" + std::to_string(last);
  out.push_back("  throughput   " + rate(r["images"], r["wall_s"]) + " mean over the wall time, " +
                rate(r["steady_images"], r["steady_s"]) + " steady (" + steady_span +
                ", tests and checkpoints left out)");
  if (r.contains("data_wait_share"))
    out.push_back("  data wait    " + std::to_string(std::lround(100 * r["data_wait_share"].get<double>())) +
                  "% of the training time waiting for the data loader (" +
                  human_seconds(r["data_wait_s"].get<double>()) + ")");
  if (r.contains("test")) {
    const nlohmann::json& final_test = r["test"]["final"];
    std::string line = "  test         final (iter " + std::to_string(final_test["iter"].get<int64_t>()) + "):";
    for (const auto& [name, value] : final_test.items())
      if (name != "iter") line += " " + name + " " + number(value.get<double>());
    line += "; best:";
    for (const auto& [name, b] : r["test"]["best"].items())
      line += " " + name + " " + number(b["value"].get<double>()) + " (iter " +
              std::to_string(b["iter"].get<int64_t>()) + ")";
    out.push_back(line);
  } else {
    out.push_back("  test         none (the config has no data.test)");
  }
  std::string saved = r["checkpoints"].empty() ? "none" : checkpoint_list(r["checkpoints"]);
  if (r.contains("no_final_checkpoint")) saved += " (" + r["no_final_checkpoint"].get<std::string>() + ")";
  out.push_back("  checkpoints  " + saved);
  return out;
}

}  // namespace poseidon
