// Connections that do not prove the token — a raw socket sending junk, one that
// says nothing, a client with the wrong token — made to the store and to the
// ranks' own listening ports while the ranks are setting up: each is refused,
// none holds up the set-up, and the channel works afterwards.
#include <gtest/gtest.h>

#include <poll.h>

#include <algorithm>
#include <thread>

#include "backends.h"
#include "checks.h"
#include "datachannel/net/auth.h"
#include "expect_throw.h"
#include "op_checks.h"
#include "rank_processes.h"
#include "rank_threads.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

// Set-up with a silent connection open must not wait for the server's
// handshake timeout (5 s by default) to drop it.
constexpr milliseconds kSetupWithin{4000};

class Auth : public ForkedRanksTest {};

net::Socket connect_to(uint16_t port) {
  return net::Socket::connect("127.0.0.1", port, net::deadline_after(milliseconds(5000)), "conformance.connect");
}

// Sends bytes that are not a handshake; the server must close the connection.
void expect_junk_refused(uint16_t port, const std::string& what) {
  net::Socket s = connect_to(port);
  const std::string junk = "GET / HTTP/1.1\r\nHost: thd\r\n\r\n" + std::string(200, 'x');
  try {
    s.send_all({reinterpret_cast<const uint8_t*>(junk.data()), junk.size()}, net::deadline_after(milliseconds(2000)),
               "conformance.junk");
  } catch (const Error&) {
    // Already closed by the server: what we want.
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(8000);
  uint8_t buf[256];
  for (;;) {
    const net::IoResult r = s.recv_some(buf);
    if (r.status == net::IoResult::Status::Eof || r.status == net::IoResult::Status::Error) return;
    if (r.status == net::IoResult::Status::WouldBlock) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ADD_FAILURE() << what << " (port " << port << "): still open 8 s after it was sent junk instead of a handshake";
        return;
      }
      pollfd p{s.fd(), POLLIN, 0};
      ::poll(&p, 1, 50);
    }
  }
}

// Runs the client side of the handshake with the wrong token.
void expect_wrong_token_refused(uint16_t port, const std::string& what) {
  net::Socket s = connect_to(port);
  const net::AuthToken wrong("not-the-job-token", "the test");
  try {
    net::client_handshake(s, wrong, net::deadline_after(milliseconds(8000)), "conformance.wrong_token");
    ADD_FAILURE() << what << " (port " << port << "): a client with the wrong token completed the handshake";
  } catch (const AuthError&) {
  } catch (...) {
    ADD_FAILURE() << what << " (port " << port << "): expected an AuthError for the wrong token, got "
                  << describe(std::current_exception());
  }
}

// The ports of `pid` other than `except`, once there are at least `count`.
std::vector<uint16_t> wait_for_listeners(pid_t pid, uint16_t except, size_t count, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<uint16_t> ports = listening_ports(pid);
    ports.erase(std::remove(ports.begin(), ports.end(), except), ports.end());
    if (ports.size() >= count || std::chrono::steady_clock::now() >= deadline) return ports;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

TEST_P(Auth, UnauthenticatedConnectionsAreRefusedWhileRanksSetUp) {
  const std::string b = backend();
  Pipe go;
  StoreWorld world(
      3,
      [&](int rank, const std::shared_ptr<Store>& store) {
        std::shared_ptr<DataChannel> dc;
        if (rank == 2) {
          // Ranks 0 and 1 wait in create() for rank 2 while the parent attacks.
          go.read_u16(milliseconds(60000));
          const milliseconds took = time_of([&] { dc = make_channel(b, store, rank, 3, milliseconds(30000)); });
          require(took < kSetupWithin, "rank 2's create() took " + std::to_string(took.count()) +
                                           " ms with unauthenticated connections open to the other ranks");
        } else {
          dc = make_channel(b, store, rank, 3, milliseconds(60000));
        }
        exercise_every_op(*dc, 8000);
        dc->barrier();
      },
      milliseconds(60000));

  std::vector<net::Socket> silent;  // open, never a byte, until the end
  try {
    const uint16_t store_port = world.store_port(milliseconds(30000));
    std::vector<std::pair<uint16_t, std::string>> targets = {{store_port, "the TCP store"}};
    if (traits_of(b).listens_on_tcp) {
      const auto rank0 = wait_for_listeners(world.pid(0), store_port, 1, milliseconds(30000));
      const auto rank1 = wait_for_listeners(world.pid(1), store_port, 1, milliseconds(30000));
      EXPECT_FALSE(rank0.empty()) << "rank 0 never listened on a port of its own";
      EXPECT_FALSE(rank1.empty()) << "rank 1 never listened on a port of its own";
      for (uint16_t p : rank0) targets.emplace_back(p, "rank 0's listener");
      for (uint16_t p : rank1) targets.emplace_back(p, "rank 1's listener");
    }
    for (const auto& [port, what] : targets) {
      silent.push_back(connect_to(port));
      expect_junk_refused(port, what);
      expect_wrong_token_refused(port, what);
    }
    TCPStoreOptions wrong;
    wrong.port = store_port;
    wrong.timeout = milliseconds(5000);
    wrong.token = "not-the-job-token";
    THD_EXPECT_THROW_MSG(TCPStore client(wrong), AuthError, "token");
  } catch (...) {
    ADD_FAILURE() << describe(std::current_exception());
  }
  go.write_u16(1);
  const auto codes = world.wait_all(milliseconds(90000));
  EXPECT_EQ(codes, std::vector<int>(3, 0)) << describe_exit_codes(codes);
}

TEST_P(Auth, RankWithAnotherTokenCannotJoin) {
  const milliseconds timeout(2000);
  auto store = std::make_shared<HashStore>(timeout);
  std::vector<milliseconds> took(2);
  const auto errors = run_threads(
      2,
      [&](int r) {
        DataChannelOptions o;
        o.store = store;
        o.rank = r;
        o.world_size = 2;
        o.timeout = timeout;
        o.token = r == 0 ? std::string(test::kToken) : std::string("another-jobs-token");
        took[static_cast<size_t>(r)] = time_of([&] {
          std::shared_ptr<DataChannel> dc = DataChannel::create(backend(), o);
          // Should create() not notice, the first message must.
          Tensor t = Tensor::ones({2});
          dc->all_reduce(t);
        });
      },
      kWatchdog);
  int refused = 0;
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) {
      ADD_FAILURE() << "rank " << r << " formed a channel with a rank holding another token";
      continue;
    }
    try {
      std::rethrow_exception(errors[r]);
    } catch (const AuthError&) {
      ++refused;
    } catch (const TimeoutError&) {
    } catch (const ConnectionError&) {
    } catch (...) {
      ADD_FAILURE() << "rank " << r << ": expected an AuthError, TimeoutError or ConnectionError, got "
                    << describe(errors[r]);
    }
    EXPECT_LT(took[r], timeout + milliseconds(4000)) << "rank " << r << " took " << took[r].count() << " ms to fail";
  }
  EXPECT_GE(refused, 1) << "no rank reported an AuthError: " << describe(errors[0]) << " / " << describe(errors[1]);
}

THD_CONFORMANCE_BACKENDS(Auth);

}  // namespace
}  // namespace thd::conformance
