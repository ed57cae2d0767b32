// Chrome trace spans and the tracing GradSink.
#include "dist/runtime/timeline.h"

#include <filesystem>
#include <fstream>

#include "core/device_memory.h"
#include "core/error.h"

namespace poseidon::dist {

namespace {
// Waits shorter than this are not worth a span: the gate was already open.
constexpr auto kShortestWait = std::chrono::microseconds(20);
}  // namespace

Timeline::Timeline(int rank) : rank_(rank), origin_(Clock::now()), wall_origin_(std::chrono::system_clock::now()) {
  lanes_ = {{compute, "compute"},
            {data, "data (waits for the next batch)"},
            {update, "update"},
            {test, "test"},
            {checkpoint, "checkpoint"},
            {device_to_host, "device-to-host copies"}};
}

void Timeline::name_lane(int lane, std::string name) {
  std::lock_guard lock(mutex_);
  lanes_[lane] = std::move(name);
}

void Timeline::add(std::string name, std::string category, int lane, Clock::time_point begin, Clock::time_point end,
                   nlohmann::json args) {
  const auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin_).count(); };
  std::lock_guard lock(mutex_);
  spans_.push_back(Span{std::move(name), std::move(category), lane, us(begin), us(end) - us(begin), std::move(args)});
}

void Timeline::write(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  const std::string process = "rank " + std::to_string(rank_);
  events.push_back({{"ph", "M"}, {"pid", rank_}, {"name", "process_name"}, {"args", {{"name", process}}}});
  std::lock_guard lock(mutex_);
  for (const auto& [tid, name] : lanes_) {
    events.push_back({{"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}}});
    events.push_back(
        {{"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"name", "thread_sort_index"}, {"args", {{"sort_index", tid}}}});
  }
  for (const Span& s : spans_) {
    nlohmann::json e = {{"ph", "X"},         {"pid", rank_},     {"tid", s.lane},       {"name", s.name},
                        {"cat", s.category}, {"ts", s.begin_us}, {"dur", s.duration_us}};
    if (!s.args.is_null()) e["args"] = s.args;
    events.push_back(std::move(e));
  }
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  std::ofstream out(path);
  const double wall_origin_us =
      std::chrono::duration<double, std::micro>(wall_origin_.time_since_epoch()).count();
  out << nlohmann::json{{"traceEvents", events},
                        {"displayTimeUnit", "ms"},
                        {"otherData", {{"rank", rank_}, {kOriginKey, wall_origin_us}}}}
             .dump()
      << '\n';
  if (!out) throw Error(path + ": cannot write the timeline");
}

std::string Timeline::path_for_rank(const std::string& path, int rank, int ranks) {
  if (ranks <= 1) return path;
  std::filesystem::path p(path);
  const std::string suffix = ".rank" + std::to_string(rank) + p.extension().string();
  return (p.parent_path() / (p.stem().string() + suffix)).string();
}

void TracingSink::await_params(const Layer& layer) {
  const auto t0 = Timeline::Clock::now();
  inner_.await_params(layer);
  const auto t1 = Timeline::Clock::now();
  if (t1 - t0 >= kShortestWait) timeline_.add("wait for " + layer.name(), "wait", Timeline::compute, t0, t1);
}

void TracingSink::grad_ready(Param& param) {
  if (!updates_in_grad_ready_) return inner_.grad_ready(param);
  const auto t0 = Timeline::Clock::now();
  inner_.grad_ready(param);
  timeline_.add("update " + param.name, "update", Timeline::update, t0, Timeline::Clock::now());
}

void TracingSink::backward_done() {
  const auto t0 = Timeline::Clock::now();
  inner_.backward_done();
  const auto t1 = Timeline::Clock::now();
  if (t1 - t0 >= kShortestWait) timeline_.add("wait for every parameter", "wait", Timeline::compute, t0, t1);
}

void TracingSink::layer_begin(const Layer& layer, bool backward) {
  inner_.layer_begin(layer, backward);
  layer_start_ = Timeline::Clock::now();
}

void TracingSink::layer_end(const Layer& layer, bool backward) {
  device_memory::synchronize(device_);
  timeline_.add(layer.name(), backward ? "backward" : "forward", Timeline::compute, layer_start_,
                Timeline::Clock::now());
  inner_.layer_end(layer, backward);
}

HostStagingSink::LandingObserver landing_recorder(Timeline& timeline) {
  return [&timeline](const Param& param, Timeline::Clock::time_point queued, Timeline::Clock::time_point landed) {
    timeline.add(param.name, "device-to-host", Timeline::device_to_host, queued, landed);
  };
}

}  // namespace poseidon::dist
