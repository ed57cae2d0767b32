// `poseidon trace merge`: the Chrome traces that `train --timeline` writes,
// one per rank under mpirun (run.rank0.json, run.rank1.json, ...), as one
// trace with a process per rank on one time axis: each file's events are
// shifted by its wall-clock origin (dist/runtime/timeline.h) relative to the earliest.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dist/runtime/timeline.h"
#include "tools/cli/commands.h"

namespace poseidon {

namespace {

// `path` itself, or where it does not exist, the per-rank files that
// Timeline::path_for_rank makes of it, rank 0 first.
std::vector<std::string> expand(const std::string& path) {
  if (std::filesystem::exists(path)) return {path};
  std::vector<std::string> ranks;
  for (int r = 0;; ++r) {
    const std::string file = dist::Timeline::path_for_rank(path, r, 2);
    if (!std::filesystem::exists(file)) break;
    ranks.push_back(file);
  }
  if (ranks.empty())
    throw Error(path + ": no such trace, nor per-rank traces " + dist::Timeline::path_for_rank(path, 0, 2) + ", ...");
  return ranks;
}

struct Trace {
  std::string path;
  nlohmann::json events;
  double origin_us = 0;  // wall clock of ts 0; 0 when the file does not say
};

Trace read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read");
  Trace t;
  t.path = path;
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw Error(path + ": not a Chrome trace (expected a JSON object with a traceEvents list)");
  t.events = std::move(doc["traceEvents"]);
  if (doc.contains("otherData") && doc["otherData"].is_object() && doc["otherData"].contains(dist::Timeline::kOriginKey))
    t.origin_us = doc["otherData"][dist::Timeline::kOriginKey].get<double>();
  return t;
}

}  // namespace

int cmd_trace_merge(const TraceMergeArgs& args) {
  std::vector<Trace> traces;
  for (const std::string& input : args.inputs)
    for (const std::string& path : expand(input)) traces.push_back(read_trace(path));

  // Every file's processes must be its own: two files of one rank are two runs.
  std::map<int64_t, std::string> owner;
  double earliest = 0;
  bool all_located = true;
  for (const Trace& t : traces) {
    all_located = all_located && t.origin_us > 0;
    if (t.origin_us > 0 && (earliest == 0 || t.origin_us < earliest)) earliest = t.origin_us;
    std::map<int64_t, bool> seen;
    for (const auto& e : t.events) {
      if (!e.contains("pid") || !e["pid"].is_number_integer()) continue;
      const int64_t pid = e["pid"].get<int64_t>();
      if (seen[pid]) continue;
      seen[pid] = true;
      auto [it, fresh] = owner.emplace(pid, t.path);
      if (!fresh)
        throw Error(t.path + ": process " + std::to_string(pid) + " is in " + it->second +
                    " too (traces of two runs, or the same file twice?)");
    }
  }
  if (!all_located && traces.size() > 1)
    std::fprintf(stderr, "warning: a trace without its wall-clock origin is not shifted: its ranks' times may not line up\n");

  nlohmann::json merged = nlohmann::json::array();
  for (Trace& t : traces) {
    const double shift = t.origin_us > 0 ? t.origin_us - earliest : 0;
    for (auto& e : t.events) {
      if (shift != 0 && e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + shift;
      merged.push_back(std::move(e));
    }
  }
  const auto dir = std::filesystem::path(args.output).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  std::ofstream out(args.output);
  out << nlohmann::json{{"traceEvents", merged},
                        {"displayTimeUnit", "ms"},
                        {"otherData", {{dist::Timeline::kOriginKey, earliest}}}}
             .dump()
      << '\n';
  if (!out) throw Error(args.output + ": cannot write the merged trace");
  std::printf("%s: %zu traces, %zu processes\n", args.output.c_str(), traces.size(), owner.size());
  return 0;
}

}  // namespace poseidon
