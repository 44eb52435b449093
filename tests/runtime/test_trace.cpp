// THD_TRACE=path.json (docs/streams.md, "Trace"): one Chrome/Perfetto trace of the
// whole job, written at shutdown: a process per node and one for the master, a track
// per stream, a slice per op, flow arrows for event waits, copies and collectives,
// timestamps on the master's clock; slices on one stream never overlap.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "datachannel/test_util.h"  // TempDir
#include "local_job.h"
#include "streams/trace_test_json.h"

namespace thd::test {
namespace {

using trace::test_json::Json;

struct SliceSeen {
  double ts;
  double dur;
  std::string name;
};

TEST(Trace, OneFileForTheWholeJobWithTracksSlicesAndFlows) {
  TempDir dir;
  const std::string path = dir.file("job.json");
  ::setenv("THD_TRACE", path.c_str(), 1);
  uint32_t s1_id = 0;
  {
    LocalJob job(2);
    ::unsetenv("THD_TRACE");
    Stream s1 = Stream::create(1);
    s1_id = s1.id();
    DistributedTensor x = DistributedTensor::ones({64});
    Event ready = current_stream(0).record();
    s1.wait(ready);  // across nodes: an arrow from node 0 to node 1
    DistributedTensor y;
    {
      StreamScope in(s1);
      y = DistributedTensor::ones({64}) * 3;
    }
    DistributedTensor z = x.to_node(1);  // a copy: an arrow
    std::vector<DistributedTensor> both{x + 1, y};
    all_reduce(both);  // a collective: an arrow
    (void)both[1].get();
    ASSERT_EQ(job.stop().problems(), "");
  }
  ::unsetenv("THD_TRACE");
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no trace at " << path;
  std::stringstream text;
  text << in.rdbuf();
  const Json doc = trace::test_json::parse_json(text.str());  // strict: throws on bad JSON
  const Json& events = doc["traceEvents"];

  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> tracks;
  std::map<std::pair<int, int>, std::vector<SliceSeen>> slices;
  std::map<std::string, std::set<std::string>> flow_phases;  // id -> phases
  for (const Json& e : events.items) {
    const std::string ph = e["ph"].str();
    const int pid = e.has("pid") ? std::stoi(e["pid"].num()) : -1;
    const int tid = e.has("tid") ? std::stoi(e["tid"].num()) : -1;
    if (ph == "M" && e["name"].str() == "process_name") processes[pid] = e["args"]["name"].str();
    if (ph == "M" && e["name"].str() == "thread_name") tracks[{pid, tid}] = e["args"]["name"].str();
    if (ph == "X") slices[{pid, tid}].push_back({std::stod(e["ts"].num()), std::stod(e["dur"].num()), e["name"].str()});
    if (ph == "s" || ph == "f") flow_phases[e["id"].str()].insert(ph);
  }
  EXPECT_EQ(processes[0], "master");
  EXPECT_EQ(processes[1], "node 0");
  EXPECT_EQ(processes[2], "node 1");
  EXPECT_EQ(tracks[std::make_pair(1, 0)], "default stream");
  EXPECT_EQ(tracks[std::make_pair(2, static_cast<int>(s1_id))], "stream " + std::to_string(s1_id));

  auto names_on = [&](int pid, int tid) {
    std::multiset<std::string> names;
    for (const auto& s : slices[{pid, tid}]) names.insert(s.name);
    return names;
  };
  const auto node0 = names_on(1, 0);
  EXPECT_EQ(node0.count("ones"), 1u);
  EXPECT_EQ(node0.count("Event::record"), 1u);
  EXPECT_EQ(node0.count("to_node (send)"), 1u);
  EXPECT_EQ(node0.count("all_reduce"), 1u);
  const auto stream1 = names_on(2, static_cast<int>(s1_id));
  EXPECT_EQ(stream1.count("Stream::wait"), 1u);
  EXPECT_EQ(stream1.count("mul"), 1u);
  EXPECT_EQ(names_on(2, 0).count("to_node"), 1u);
  EXPECT_GE(names_on(0, 0).count("get"), 1u);

  // Every arrow has both ends: the event wait, the copy and the collective.
  size_t complete = 0;
  for (const auto& [id, phases] : flow_phases) {
    EXPECT_EQ(phases.size(), 2u) << "flow " << id << " has one end only";
    complete += phases.size() == 2 ? 1 : 0;
  }
  EXPECT_GE(complete, 3u);

  // Slices of one track never overlap.
  for (auto& [track, list] : slices) {
    std::sort(list.begin(), list.end(), [](const SliceSeen& a, const SliceSeen& b) { return a.ts < b.ts; });
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_LE(list[i - 1].ts + list[i - 1].dur, list[i].ts + 1e-3)
          << "slices '" << list[i - 1].name << "' and '" << list[i].name << "' overlap on process " << track.first
          << " track " << track.second;
    }
  }
}

}  // namespace
}  // namespace thd::test
