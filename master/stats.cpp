// thd::stats(): one StatsQuery per node, answered on its own tag.
#include <thd/distributed.h>

#include "datachannel/check.h"
#include "master/graph.h"
#include "master/session.h"
#include "protocol/framing.h"

namespace thd {

namespace master {

NodeStats Session::node_stats(int node) {
  check_not_capturing("stats");
  NodeLink& l = link(node, "stats");
  l.throw_if_lost();
  const int64_t tag = next_fetch_tag();
  protocol::PostedMessage answer(*channel_, l.rank(), tag, options_.timeout);
  l.append_on(0, fb::Op::StatsQuery, [&](auto& b) { return fb::CreateStatsQuery(b, tag).Union(); });
  l.flush();
  const fb::Message* m = nullptr;
  try {
    m = &protocol::verify_message(answer.wait(), "master");
  } catch (const PeerLost& e) {
    l.on_lost(worker_lost(node, e));
    l.throw_if_lost();
  } catch (const TimeoutError&) {
    THD_THROW_AT(TimeoutError, "stats", 0, node + 1, "worker node {} did not answer within {} ms", node,
                 options_.timeout.count());
  }
  const fb::NodeStats* s = m->body_as_NodeStats();
  if (s == nullptr || s->node() != node) {
    THD_THROW_AT(protocol::ProtocolError, "stats", 0, node + 1, "worker node {} answered a stats query with a {}",
                 node, s == nullptr ? fb::EnumNameBody(m->body_type()) : "another node's statistics");
  }
  NodeStats out;
  out.node = node;
  out.backend = channel_->backend();
  out.ops_executed = s->ops_executed();
  if (s->streams() != nullptr) {
    for (const fb::StreamLoad* load : *s->streams()) out.streams.push_back({load->stream(), load->queued()});
  }
  out.bytes_sent = s->bytes_sent();
  out.bytes_received = s->bytes_received();
  out.messages_sent = s->messages_sent();
  out.messages_received = s->messages_received();
  out.memory_in_use = s->memory_in_use();
  out.memory_peak = s->memory_peak();
  out.live_tensors = s->live_tensors();
  out.live_events = s->live_events();
  out.cuda_devices = s->cuda_devices();
  if (s->devices() != nullptr) {
    for (const fb::DeviceMemory* d : *s->devices()) out.devices.push_back({d->index(), d->in_use(), d->peak()});
  }
  return out;
}

}  // namespace master

std::string backend_name() { return master::current_session("backend_name")->channel().backend(); }

std::vector<NodeStats> stats() {
  auto s = master::current_session("stats");
  std::vector<NodeStats> out;
  for (int n = 0; n < s->num_nodes(); ++n) out.push_back(s->node_stats(n));
  return out;
}

}  // namespace thd

#if THD_ENABLE_TEST_HOOKS
namespace thd::detail {

namespace {

void test_latch(uint64_t key, bool open, std::chrono::milliseconds timeout) {
  auto s = master::current_session("test_latch");
  s->link(current_node(), "test_latch").append(master::fb::Op::TestLatch, [&](auto& b) {
    return master::fb::CreateTestLatch(b, key, open, static_cast<uint32_t>(timeout.count())).Union();
  });
}

}  // namespace

void test_latch_open(uint64_t key) { test_latch(key, true, std::chrono::milliseconds(0)); }
void test_latch_wait(uint64_t key, std::chrono::milliseconds timeout) { test_latch(key, false, timeout); }

}  // namespace thd::detail
#endif
