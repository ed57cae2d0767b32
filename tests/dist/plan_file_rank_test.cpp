// A plan file keeps each lowrank layer's rank (dist/plan/plan_file.h): written,
// read back and pinned, the plan has the same ranks, not dist.lowrank_rank;
// a rank that is not a positive integer, on a layer that is not lowrank, or
// larger than the layer allows, is an error naming the file, the key and
// what was expected.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "dist/plan/plan_file.h"

namespace poseidon::testing {
namespace {

Net lenet() { return Net(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"), 2); }

std::string temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("poseidon_" + name + "_" + std::to_string(getpid()) + ".json");
}

size_t layer_index(Net& net, const std::string& name) {
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name() == name) return i;
  throw Error("no layer " + name);
}

// Every layer's lowrank group and its rank, by layer name.
std::map<std::string, int> ranks_of(const dist::CommPlan& plan, Net& net) {
  std::map<std::string, int> out;
  for (const dist::SyncGroup& g : plan.groups)
    if (g.scheme == dist::Scheme::lowrank) out[net.layer(plan.params[g.params[0]].layer).name()] = g.rank;
  return out;
}

TEST(PlanFileRank, PinnedPlanHasTheRecordedRanks) {
  Net net = lenet();
  dist::DistConfig config;  // dist.lowrank_rank 4: the ranks below differ from it
  std::map<size_t, dist::Scheme> schemes;
  for (const dist::PlannedParam& p : dist::backward_order(net)) schemes[p.layer] = dist::Scheme::ps;
  schemes[layer_index(net, "fc1")] = dist::Scheme::lowrank;
  schemes[layer_index(net, "conv2")] = dist::Scheme::lowrank;
  const std::map<size_t, int> chosen = {{layer_index(net, "fc1"), 7}, {layer_index(net, "conv2"), 2}};
  const dist::CommPlan planned = dist::plan_for_config(net, config, 4, {}, &schemes, nullptr, 0, &chosen);
  ASSERT_EQ(ranks_of(planned, net), (std::map<std::string, int>{{"conv2", 2}, {"fc1", 7}}));

  const std::string path = temp_file("plan_ranks");
  dist::write_plan_file(path, dist::plan_record(planned, net, dist::LinkModel{}));
  const dist::PlanRecord read = dist::read_plan_file(path);
  std::filesystem::remove(path);
  EXPECT_EQ(read.ranks, (std::map<std::string, int>{{"conv2", 2}, {"fc1", 7}}));
  const std::map<size_t, dist::Scheme> pinned = dist::pinned_schemes(read, net, path);
  const std::map<size_t, int> ranks = dist::pinned_ranks(read, net, path);
  const dist::CommPlan again = dist::plan_for_config(net, config, 4, {}, &pinned, nullptr, 0, &ranks);
  EXPECT_EQ(ranks_of(again, net), ranks_of(planned, net));
}

// The error `read_plan_file` throws for a lenet plan whose fc1 entry is `fc1`.
std::string error_for(const std::string& fc1) {
  const std::string path = temp_file("plan_bad_rank");
  {
    std::ofstream out(path);
    out << R"({"format": "poseidon-plan-1", "model": "lenet", "workers": 2, "batch": 2,
 "link": {"bandwidth_gbps": 10, "latency_us": 20, "gemm_gflops": 50},
 "layers": [{"name": "conv1", "scheme": "ps"}, {"name": "conv2", "scheme": "ps"}, )"
        << fc1 << R"(, {"name": "fc2", "scheme": "ps"}]})";
  }
  std::string message;
  try {
    dist::read_plan_file(path);
  } catch (const Error& e) {
    message = e.what();
  }
  std::filesystem::remove(path);
  return message;
}

TEST(PlanFileRank, BadRanksNameTheFileTheKeyAndWhatWasExpected) {
  EXPECT_EQ(error_for(R"({"name": "fc1", "scheme": "lowrank", "rank": 3})"), "");
  for (const std::string& bad : {R"(0)", R"(-2)", R"("four")", R"(2.5)"}) {
    const std::string message = error_for(R"({"name": "fc1", "scheme": "lowrank", "rank": )" + bad + "}");
    EXPECT_NE(message.find("poseidon_plan_bad_rank"), std::string::npos) << message;
    EXPECT_NE(message.find("key 'layers[2].rank'"), std::string::npos) << message;
    EXPECT_NE(message.find("expected an integer from 1"), std::string::npos) << message;
    EXPECT_NE(message.find("found " + bad), std::string::npos) << message;
  }
  const std::string on_ps = error_for(R"({"name": "fc1", "scheme": "ps", "rank": 3})");
  EXPECT_NE(on_ps.find("key 'layers[2].rank': a rank is for lowrank layers only; layer 'fc1' is ps"),
            std::string::npos)
      << on_ps;
}

TEST(PlanFileRank, RankTheLayerCannotTakeNamesTheFileAndLayer) {
  Net net = lenet();
  dist::PlanRecord record;
  record.ranks["fc2"] = 10;  // fc2's weight is 10 x 500: a rank must stay below 10
  try {
    dist::pinned_ranks(record, net, "pinned.json");
    FAIL() << "rank 10 accepted for a 10-row weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pinned.json: layer 'fc2' cannot be compressed to rank 10"),
              std::string::npos)
        << e.what();
  }
  record.ranks["fc2"] = 9;
  EXPECT_EQ(dist::pinned_ranks(record, net, "pinned.json").at(layer_index(net, "fc2")), 9);
}

}  // namespace
}  // namespace poseidon::testing
