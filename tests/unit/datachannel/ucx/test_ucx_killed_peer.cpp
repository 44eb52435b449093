// A ucx rank whose peer process is killed while a send to it is in flight: the
// send (which UCX keeps until its own detection of the death, on shared memory
// its keepalive) and the receives from the peer end with PeerLost as soon as the
// transport's process watch sees the process gone, or the pipe is told. UCX's
// keepalive is set to a minute here, so nothing but thd's own detection can end
// them in time. The peer is this binary run again (KilledPeer.HoldsRankOne).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/auth.h"
#include "datachannel/pipe/pipe_test_util.h"
#include "datachannel/pipe/pipe_transport.h"
#include "datachannel/transport_test_util.h"
#include "datachannel/ucx/ucx_pipe.h"
#include "datachannel/ucx/ucx_test_settings.h"

extern char** environ;

namespace thd::test {
namespace {

using namespace std::chrono_literals;
using detail::pipe::MessagePipe;
using detail::pipe::PipeTransport;
using detail::ucx::make_pipe;
using detail::ucx::PipeSettings;

constexpr const char* kStoreVar = "THD_UCX_KILLED_PEER_STORE";
constexpr const char* kTransportsVar = "THD_UCX_KILLED_PEER_TRANSPORTS";
// A send this large cannot finish without the receiver: over shared memory it
// needs the peer's answer to its rendezvous, or room in the peer's FIFO.
constexpr size_t kStuckBytes = size_t{8} << 20;

PipeSettings settings_for(const std::string& transports) {
  PipeSettings s = ucx_settings_for(transports);
  // UCX's own detection of a killed shared-memory peer out of the picture.
  s.ucx_config.emplace_back("KEEPALIVE_INTERVAL", "60s");
  return s;
}

detail::pipe::PipeAuth auth_for(std::shared_ptr<Store> store) {
  return {net::AuthToken(std::string(kToken), "test"), std::move(store), std::chrono::milliseconds(kLong)};
}

// Rank 1 of a two-rank world: a whole transport (its process watched by rank 0),
// held until it is killed (or 30 s pass).
TEST(KilledPeer, HoldsRankOne) {
  const char* store_path = std::getenv(kStoreVar);
  const char* transports = std::getenv(kTransportsVar);
  if (store_path == nullptr || transports == nullptr) GTEST_SKIP() << "run by UcxKilledPeer only";
  auto store = std::make_shared<FileStore>(store_path, -1, kLong);
  PipeTransport transport(make_pipe(options_for(store, 1, 2), settings_for(transports)), auth_for(store));
  std::this_thread::sleep_for(30s);
}

class UcxKilledPeer : public ::testing::TestWithParam<std::string> {
 protected:
  // Starts rank 1 in a child process; store_path names the world's store.
  pid_t spawn_peer() {
    store_path_ = dir_.file("store");
    // Everything the child needs is built before fork: it only execs.
    std::string self_exe(4096, '\0');
    self_exe.resize(
        static_cast<size_t>(std::max<ssize_t>(0, ::readlink("/proc/self/exe", self_exe.data(), self_exe.size()))));
    args_ = {self_exe, "--gtest_filter=KilledPeer.HoldsRankOne"};
    env_ = {std::string(kStoreVar) + "=" + store_path_, std::string(kTransportsVar) + "=" + GetParam()};
    for (char** e = environ; *e != nullptr; ++e) env_.emplace_back(*e);
    for (auto& a : args_) argv_.push_back(a.data());
    argv_.push_back(nullptr);
    for (auto& e : env_) envp_.push_back(e.data());
    envp_.push_back(nullptr);
    return children_.spawn([&] {
      ::execve(argv_[0], argv_.data(), envp_.data());
      return 97;
    });
  }
  // SIGKILL, and reaped: a zombie would still count as alive to UCX.
  void kill_peer(pid_t child) {
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    children_.wait_all();
  }
  std::shared_ptr<Store> store() { return std::make_shared<FileStore>(store_path_, -1, kLong); }

 private:
  TempDir dir_;
  std::string store_path_;
  std::vector<std::string> args_, env_;
  std::vector<char*> argv_, envp_;
  Children children_;
};

// Drives the pipe as PipeTransport does when it waits, until `op` ends.
bool wait_sleeping(MessagePipe& pipe, const TestOp& op, std::chrono::milliseconds timeout) {
  const auto deadline = in(timeout);
  while (!op.finished()) {
    if (net::Clock::now() >= deadline) return false;
    if (pipe.progress() > 0) continue;
    if (pipe.arm()) pipe.sleep(std::min(deadline, in(10ms)), true);
  }
  return true;
}

TEST_P(UcxKilledPeer, PeerLostEndsASendInFlightAndTheReceivesFromThePeer) {
  const pid_t child = spawn_peer();
  auto st = store();
  std::unique_ptr<MessagePipe> pipe = make_pipe(options_for(st, 0, 2), settings_for(GetParam()));
  const std::vector<uint8_t> big = pattern(kStuckBytes, 1);
  std::vector<uint8_t> in(64);
  TestOp sent, received;
  pipe->send(1, 7, big, &sent);
  pipe->recv(1, 8, in, &received);
  kill_peer(child);
  if (GetParam() == "shm") {
    // UCX itself does not notice the death within its keepalive: both wait.
    EXPECT_FALSE(wait_sleeping(*pipe, sent, 300ms)) << "UCX ended a send to a killed shared-memory peer: "
                                                     << what(sent.error());
    EXPECT_FALSE(received.finished());
  }
  const auto told = net::Clock::now();
  pipe->peer_lost(1, "its process exited (the test says so)");
  ASSERT_TRUE(wait_sleeping(*pipe, sent, 2s)) << "the send to the lost peer is still in flight";
  ASSERT_TRUE(wait_sleeping(*pipe, received, 1s)) << "the receive from the lost peer is still pending";
  EXPECT_LT(net::Clock::now() - told, 1s);
  std::string message;
  EXPECT_TRUE(holds<PeerLost>(sent.error(), &message)) << what(sent.error());
  if (GetParam() == "shm") {
    EXPECT_NE(message.find("the test says so"), std::string::npos) << message;
  }
  EXPECT_TRUE(holds<PeerLost>(received.error())) << what(received.error());
  EXPECT_EQ(sent.calls(), 1);
  EXPECT_EQ(received.calls(), 1);
  TestOp late;
  pipe->recv(1, 9, in, &late);
  ASSERT_TRUE(wait_sleeping(*pipe, late, 1s));
  EXPECT_TRUE(holds<PeerLost>(late.error())) << what(late.error());
}

TEST_P(UcxKilledPeer, TheProcessWatchFailsASendInFlightAndEveryReceiveFromThePeerWithinASecond) {
  const pid_t child = spawn_peer();
  auto st = store();
  PipeTransport t(make_pipe(options_for(st, 0, 2), settings_for(GetParam())), auth_for(st));
  // Raw bytes that fit UCX's tag (matched by UCX itself) and an 8-byte word: what
  // a collective's members send each other. No tensor keeps the send's memory.
  const std::vector<uint8_t> big = pattern(kStuckBytes, 2);
  std::vector<uint8_t> word(8), more(8);
  auto send = isend(t, big, 1, 3);
  auto recv = irecv(t, word, 1, 4);
  kill_peer(child);
  const auto killed = net::Clock::now();
  const std::exception_ptr send_error = wait_error(t, *send, 5s);
  const std::exception_ptr recv_error = wait_error(t, *recv, 5s);
  EXPECT_LT(net::Clock::now() - killed, 1s);
  std::string message;
  EXPECT_TRUE(holds<PeerLost>(send_error, &message)) << what(send_error);
  if (GetParam() == "shm") {
    EXPECT_NE(message.find("exited"), std::string::npos) << message;
  }
  EXPECT_TRUE(holds<PeerLost>(recv_error)) << what(recv_error);
  // Posted after the loss: ended at once, not at their deadline.
  const auto later = net::Clock::now();
  auto late_recv = irecv(t, more, 1, 5);
  auto late_send = isend(t, big, 1, 6);
  EXPECT_TRUE(holds<PeerLost>(wait_error(t, *late_recv, 5s))) << what(late_recv->error);
  EXPECT_TRUE(holds<PeerLost>(wait_error(t, *late_send, 5s))) << what(late_send->error);
  EXPECT_LT(net::Clock::now() - later, 500ms);
}

// A blocking receive on the direct path (straight to the pipe, past the engine's
// queues) fails the same way when its peer is killed while it waits.
TEST_P(UcxKilledPeer, ABlockingReceiveOnTheDirectPathFailsWithPeerLostWithinASecond) {
  const pid_t child = spawn_peer();
  auto st = store();
  PipeTransport t(make_pipe(options_for(st, 0, 2), settings_for(GetParam())), auth_for(st));
  std::vector<uint8_t> word(8);
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    kill_peer(child);
  });
  const auto start = net::Clock::now();
  std::exception_ptr error;
  try {
    t.recv_blocking(word, 1, raw_envelope(4, 8),
                    {detail::OpLabel::recv_from(1, 4), net::deadline_after(10s), 0, false, {}, nullptr});
  } catch (...) {
    error = std::current_exception();
  }
  killer.join();
  EXPECT_LT(net::Clock::now() - start, 1200ms);
  EXPECT_TRUE(holds<PeerLost>(error)) << what(error);
  EXPECT_EQ(t.direct_counts().recvs, 1U) << "the receive did not take the direct path";
  // Later ones fail at once, on the general path.
  const auto later = net::Clock::now();
  EXPECT_THROW(t.recv_blocking(word, 1, raw_envelope(5, 8),
                               {detail::OpLabel::recv_from(1, 5), net::deadline_after(10s), 0, false, {}, nullptr}),
               PeerLost);
  EXPECT_LT(net::Clock::now() - later, 500ms);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxKilledPeer, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace thd::test
