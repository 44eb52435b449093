// Messages of any length: recv_message/irecv_message take the next message of
// bytes whatever its size (the channel sizes the buffer when it matches), in send
// order with fixed-length receives on the same tag, from one source or any; a
// message over the limit or of another kind fails its receive and is discarded,
// leaving the tag in step.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "backends.h"
#include "checks.h"
#include "rank_threads.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

class AnyLength : public BackendTest {};

std::vector<uint8_t> bytes_for(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 31 + static_cast<size_t>(seed) * 7 + i / 251) & 0xff);
  return v;
}

void require_message(const Message& m, const std::vector<uint8_t>& expected, int source, const std::string& what) {
  require(m.size() == expected.size(),
          what + ": " + std::to_string(m.size()) + " bytes, expected " + std::to_string(expected.size()));
  require(m.source() == source, what + ": source " + std::to_string(m.source()) + ", expected " + std::to_string(source));
  require(expected.empty() || std::equal(expected.begin(), expected.end(), m.data()), what + ": the bytes differ");
}

// Small (inline), medium and large (a backend's rendezvous path) messages, the
// receives posted before the messages come (irecv_message) and after they wait
// unexpected (recv_message once a later message on another tag was seen).
TEST_P(AnyLength, MessagesOfEveryLengthPostedBeforeAndAfterTheyArrive) {
  const std::vector<size_t> sizes = {0, 1, 7, 1000, (64u << 10) + 3, (1u << 20) + 5};
  run_world(backend(), 2, [&](RankEnv& env) {
    if (env.rank == 0) {
      env.sync.arrive_and_wait();  // rank 1 posted its first receives
      for (size_t i = 0; i < sizes.size(); ++i) env.dc.send_bytes(bytes_for(sizes[i], int(i)), 1, {.tag = 1});
      // Async: a large one waits at this rank (rendezvous) until its receive is posted.
      std::vector<std::vector<uint8_t>> later;
      std::vector<Request> sent;
      for (size_t i = 0; i < sizes.size(); ++i) later.push_back(bytes_for(sizes[i], int(i) + 50));
      for (const auto& m : later) sent.push_back(env.dc.isend_bytes(m, 1, {.tag = 2}));
      const uint8_t done = 1;
      env.dc.send_bytes({&done, 1}, 1, {.tag = 3});
      wait_all(sent);
      return;
    }
    std::vector<Request> posted;
    for (size_t i = 0; i < sizes.size(); ++i) posted.push_back(env.dc.irecv_message(0, 2u << 20, {.tag = 1}));
    env.sync.arrive_and_wait();
    for (size_t i = 0; i < sizes.size(); ++i) {
      posted[i].wait();
      require(posted[i].source() == 0 && posted[i].bytes() == sizes[i], "Request::source()/bytes() of irecv_message");
      require_message(posted[i].take_message(), bytes_for(sizes[i], int(i)), 0,
                      "irecv_message posted first, message " + std::to_string(i));
    }
    uint8_t done = 0;
    env.dc.recv_bytes({&done, 1}, 0, {.tag = 3});
    for (size_t i = 0; i < sizes.size(); ++i) {
      require_message(env.dc.recv_message(0, 2u << 20, {.tag = 2}), bytes_for(sizes[i], int(i) + 50), 0,
                      "recv_message after the message came, message " + std::to_string(i));
    }
  });
}

TEST_P(AnyLength, AnySourceAndFixedLengthReceivesShareATagInSendOrder) {
  run_world(backend(), 4, [](RankEnv& env) {
    if (env.rank != 0) {
      // Per sender: one of any length, then one of a fixed length, then another.
      env.dc.send_bytes(bytes_for(100 * size_t(env.rank), env.rank), 0, {.tag = 4});
      env.dc.send_bytes(bytes_for(8, env.rank + 10), 0, {.tag = 4});
      env.dc.send_bytes(bytes_for(70000, env.rank + 20), 0, {.tag = 4});
      return;
    }
    std::set<int> seen;
    for (int i = 1; i < env.size; ++i) {
      Message m = env.dc.recv_message(kAnySource, 1 << 20, {.tag = 4});
      const int src = m.source();
      require(src >= 1 && src < env.size && seen.insert(src).second,
              "recv_message from kAnySource: source " + std::to_string(src));
      require_message(m, bytes_for(100 * size_t(src), src), src, "the first message of rank " + std::to_string(src));
      std::vector<uint8_t> fixed(8);
      env.dc.recv_bytes(fixed, src, {.tag = 4});
      require(fixed == bytes_for(8, src + 10), "recv_bytes after recv_message from rank " + std::to_string(src));
      require_message(env.dc.recv_message(src, 1 << 20, {.tag = 4}), bytes_for(70000, src + 20), src,
                      "the third message of rank " + std::to_string(src));
    }
  });
}

TEST_P(AnyLength, AMessageOverTheLimitFailsItsReceiveAndIsDiscarded) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      env.dc.send_bytes(bytes_for(100, 1), 1, {.tag = 5});
      env.dc.send_bytes(bytes_for(10, 2), 1, {.tag = 5});
      env.dc.send_bytes(bytes_for(3u << 20, 3), 1, {.tag = 5});  // a large one: rendezvous where there is one
      env.dc.send_bytes(bytes_for(11, 4), 1, {.tag = 5});
      return;
    }
    require_throws<ValueError>([&] { (void)env.dc.recv_message(0, 50, {.tag = 5}); }, {"100 bytes", "50 bytes"},
                               "recv_message(limit 50) of a 100-byte message");
    require_message(env.dc.recv_message(0, 50, {.tag = 5}), bytes_for(10, 2), 0, "the message after a discarded one");
    Request r = env.dc.irecv_message(0, 1000, {.tag = 5});
    require_throws<ValueError>([&] { r.wait(); }, {"3145728 bytes", "1000 bytes"},
                               "irecv_message(limit 1000) of a 3 MiB message");
    require_throws<ValueError>([&] { (void)r.take_message(); }, {"take_message", "failed"},
                               "take_message of a failed receive");
    require_message(env.dc.recv_message(0, 1000, {.tag = 5}), bytes_for(11, 4), 0,
                    "the message after a discarded large one");
  });
}

TEST_P(AnyLength, ATensorWhereBytesBelongIsATypeError) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      env.dc.send(Tensor::full({3}, 2.5, kFloat32), 1, {.tag = 6});
      env.dc.send_bytes(bytes_for(5, 6), 1, {.tag = 6});
      return;
    }
    require_throws<TypeError>([&] { (void)env.dc.recv_message(0, 1 << 20, {.tag = 6}); }, {"float32"},
                              "recv_message of a float32 tensor's message");
    require_message(env.dc.recv_message(0, 1 << 20, {.tag = 6}), bytes_for(5, 6), 0, "the message after the tensor");
  });
}

TEST_P(AnyLength, TakeMessageOnceFromAFinishedReceiveOnly) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      env.sync.arrive_and_wait();
      env.dc.send_bytes(bytes_for(9, 7), 1, {.tag = 7});
      return;
    }
    Request r = env.dc.irecv_message(0, 64, {.tag = 7});
    require(r.wait_for(milliseconds(20)) == WaitStatus::Timeout, "wait_for of an irecv_message with no sender yet");
    require_throws<ValueError>([&] { (void)r.take_message(); }, {"take_message", "pending"},
                               "take_message of a pending receive");
    env.sync.arrive_and_wait();
    r.wait();
    require_message(r.take_message(), bytes_for(9, 7), 0, "take_message");
    require_throws<ValueError>([&] { (void)r.take_message(); }, {"taken already"}, "take_message twice");
    std::vector<uint8_t> fixed(4);
    Request plain = env.dc.irecv_bytes(fixed, 0, {.tag = 8});
    plain.cancel();
    require_throws<ValueError>([&] { (void)plain.take_message(); }, {"not an irecv_message"},
                               "take_message of an irecv_bytes request");
    require_throws<ValueError>([&] { (void)Request().take_message(); }, {"not an irecv_message"},
                               "take_message of a default Request");
  });
}

TEST_P(AnyLength, ACancelledOrTimedOutReceiveLeavesTheTagUsable) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 1) {
      Request r = env.dc.irecv_message(0, 64, {.tag = 9});
      r.cancel(std::make_exception_ptr(ValueError("not wanted")));
      require_throws<ValueError>([&] { r.wait(); }, {"not wanted"}, "wait() on a cancelled irecv_message");
      require_throws<TimeoutError>([&] { (void)env.dc.recv_message(0, 64, {.tag = 9, .timeout = milliseconds(100)}); },
                                   {"recv"}, "recv_message with no sender and a 100 ms timeout");
    }
    env.sync.arrive_and_wait();
    if (env.rank == 0) {
      env.dc.send_bytes(bytes_for(33, 9), 1, {.tag = 9});
    } else {
      require_message(env.dc.recv_message(0, 64, {.tag = 9}), bytes_for(33, 9), 0,
                      "recv_message on the tag of a cancelled and a timed-out one");
    }
  });
}

THD_CONFORMANCE_BACKENDS(AnyLength);

}  // namespace
}  // namespace thd::conformance
