// Point to point: send/recv/isend/irecv of tensors and bytes, tags, kAnySource,
// the non-overtaking rule, Request semantics, and receive timeouts.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <tuple>

#include <thd/interrupt.h>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

class P2P : public BackendTest {};

std::span<const uint8_t> bytes_of(const Tensor& t) {
  return {static_cast<const uint8_t*>(t.numel() ? t.data_ptr() : nullptr), t.nbytes()};
}
std::span<uint8_t> writable_bytes_of(Tensor& t) {
  return {static_cast<uint8_t*>(t.numel() ? t.data_ptr() : nullptr), t.nbytes()};
}

TEST_P(P2P, TensorsOfEveryDtypeAndSize) {
  run_world(backend(), 3, [](RankEnv& env) {
    int64_t tag = 0;  // a tag (and data) of its own for every case
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) {
        ++tag;
        check_send_recv_ring(env.dc, dtype, numel, tag, 10 + tag);
      }
    }
    ++tag;
    check_send_recv_ring(env.dc, kFloat32, large_numel(kFloat32), tag, 10 + tag);
    ++tag;
    check_send_recv_ring(env.dc, kUInt8, large_numel(kUInt8), tag, 10 + tag);
  });
}

TEST_P(P2P, BytesOfEverySize) {
  run_world(backend(), 2, [](RankEnv& env) {
    int64_t tag = 0;
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{(1u << 20) + 3}}) {
      ++tag;
      check_bytes_ring(env.dc, n, tag, 50 + tag);
    }
  });
}

TEST_P(P2P, AnySourceReportsEachSender) {
  for (int n : {3, 5}) {
    run_world(backend(), n, [](RankEnv& env) {
      for (int64_t round = 0; round < 3; ++round) check_any_source(env.dc, 20 + round, 90 + round);
      // The async and byte forms say who sent through Request::source().
      if (env.rank != 0) {
        const Tensor mine = pattern(kUInt8, 3, seed_of(env.rank, 99));
        env.dc.send_bytes(bytes_of(mine), 0, {.tag = 30});
        return;
      }
      std::set<int> seen;
      for (int i = 1; i < env.size; ++i) {
        Tensor got = sentinel(kUInt8, {3});
        Request r = env.dc.irecv_bytes(writable_bytes_of(got), kAnySource, {.tag = 30});
        r.wait();
        const int source = r.source();
        require(source >= 1 && source < env.size && seen.insert(source).second,
                "irecv_bytes from kAnySource: Request::source() is " + std::to_string(source));
        require(r.bytes() == 3, "irecv_bytes from kAnySource: Request::bytes() is " + std::to_string(r.bytes()));
        require_same(got, pattern(kUInt8, 3, seed_of(source, 99)), "irecv_bytes from kAnySource");
      }
    });
  }
}

TEST_P(P2P, TagsMatchMessagesWhateverTheOrder) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      std::vector<Request> sent;
      for (int64_t tag : {1, 2, 3}) sent.push_back(env.dc.isend(Tensor::full({4}, tag * 10, kInt64), 1, {.tag = tag}));
      wait_all(sent);
      return;
    }
    for (int64_t tag : {3, 1, 2}) {
      Tensor got = sentinel(kInt64, {4});
      env.dc.recv(got, 0, {.tag = tag});
      require_same(got, Tensor::full({4}, tag * 10, kInt64), "recv with tag " + std::to_string(tag));
    }
  });
}

TEST_P(P2P, MessagesWithOneTagArriveInSendOrder) {
  constexpr int kMessages = 24;
  // Small and large messages alternate: a large one must not be overtaken by the
  // small one sent after it.
  auto numel_of = [](int i) -> int64_t { return i % 2 == 0 ? 1 : 65536 + i; };
  run_world(backend(), 2, [&](RankEnv& env) {
    if (env.rank == 0) {
      std::vector<Request> sent;
      for (int i = 0; i < kMessages; ++i) sent.push_back(env.dc.isend(Tensor::full({numel_of(i)}, i, kInt32), 1));
      wait_all(sent);
      return;
    }
    std::vector<Tensor> got;
    std::vector<Request> received;
    for (int i = 0; i < kMessages; ++i) {
      got.push_back(sentinel(kInt32, {numel_of(i)}));
      received.push_back(env.dc.irecv(got.back(), 0));
    }
    wait_all(received);
    for (int i = 0; i < kMessages; ++i) {
      require_same(got[static_cast<size_t>(i)], Tensor::full({numel_of(i)}, i, kInt32),
                   "message " + std::to_string(i) + " of " + std::to_string(kMessages) + " with tag 0");
    }
  });
}

TEST_P(P2P, StridedTensorTravelsInRowMajorOrder) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Tensor base = pattern(kFloat64, 12, 5).reshape({3, 4});
    if (env.rank == 0) {
      env.dc.send(base.transpose(0, 1), 1);
    } else {
      Tensor got = sentinel(kFloat64, {12});
      env.dc.recv(got, 0);
      require_same(got, base.transpose(0, 1).contiguous(), "recv of a sent transposed tensor");
    }
  });
}

TEST_P(P2P, AsyncSendKeepsItsTensorAlive) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      // The only handle to the tensor is the one the Request keeps.
      Request r = env.dc.isend(pattern(kFloat32, 100000, 6), 1, {.tag = 4});
      env.sync.arrive_and_wait();
      r.wait();
      return;
    }
    env.sync.arrive_and_wait();  // the receive is posted after the sender dropped its handle
    Tensor got = sentinel(kFloat32, {100000});
    env.dc.recv(got, 0, {.tag = 4});
    require_same(got, pattern(kFloat32, 100000, 6), "isend of a temporary tensor");
  });
}

// A strided tensor is sent from a contiguous copy made for the send: the request
// keeps that copy alive after isend returns, and a contiguous tensor is sent
// from its own memory (no copy), which the request keeps too.
TEST_P(P2P, AsyncSendOfAStridedTensorKeepsItsCopyAlive) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Tensor base = pattern(kFloat32, 100000, 7).reshape({400, 250});
    if (env.rank == 0) {
      Request strided = env.dc.isend(base.transpose(0, 1), 1, {.tag = 5});
      Request whole = env.dc.isend(base.view({100000}), 1, {.tag = 6});
      env.sync.arrive_and_wait();
      strided.wait();
      whole.wait();
      return;
    }
    env.sync.arrive_and_wait();  // posted after isend returned (and its copy's local handle is gone)
    Tensor got = sentinel(kFloat32, {250, 400});
    env.dc.recv(got, 0, {.tag = 5});
    require_same(got, base.transpose(0, 1).contiguous(), "isend of a transposed tensor");
    Tensor whole = sentinel(kFloat32, {100000});
    env.dc.recv(whole, 0, {.tag = 6});
    require_same(whole, base.view({100000}), "isend of a contiguous view");
  });
}

// An isend's request, whether the message left within the call (a small one, whose
// request is made after it) or is waited for (a large one), reports what it sent.
TEST_P(P2P, IsendRequestsReportTheirBytesWhetherTheyLeftAtOnceOrNot) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Tensor small = pattern(kInt64, 3, 8);
    const Tensor large = pattern(kFloat32, 100000, 9);
    if (env.rank == 0) {
      Request a = env.dc.isend(small, 1, {.tag = 7});
      Request b = env.dc.isend(large, 1, {.tag = 8});
      a.wait();
      b.wait();
      for (const auto& [r, t, what] : {std::tuple{&a, &small, "small"}, std::tuple{&b, &large, "large"}}) {
        require(r->test() && r->error() == nullptr, std::string("the ") + what + " isend did not succeed");
        require(r->bytes() == t->nbytes(), std::string("the ") + what + " isend's Request::bytes() is " +
                                               std::to_string(r->bytes()) + ", expected " +
                                               std::to_string(t->nbytes()));
      }
      return;
    }
    Tensor got_small = sentinel(kInt64, {3});
    Tensor got_large = sentinel(kFloat32, {100000});
    env.dc.recv(got_small, 0, {.tag = 7});
    env.dc.recv(got_large, 0, {.tag = 8});
    require_same(got_small, small, "the small isend");
    require_same(got_large, large, "the large isend");
  });
}

TEST_P(P2P, RecvTimesOutAndTheTagStaysUsable) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 1) {
      Tensor got = sentinel(kInt64, {3});
      const milliseconds took = time_of([&] {
        require_throws<TimeoutError>([&] { env.dc.recv(got, 0, {.tag = 1, .timeout = milliseconds(200)}); },
                                     {"recv"}, "recv with no sender and a 200 ms timeout");
      });
      require(took >= milliseconds(150) && took < milliseconds(5000),
              "recv with a 200 ms timeout failed after " + std::to_string(took.count()) + " ms");
      require_same(got, sentinel(kInt64, {3}), "the buffer of a recv that timed out");
    }
    env.sync.arrive_and_wait();
    // A message sent after the timed-out receive is not swallowed by it.
    if (env.rank == 0) {
      env.dc.send(Tensor::full({3}, 42, kInt64), 1, {.tag = 1});
    } else {
      Tensor got = sentinel(kInt64, {3});
      env.dc.recv(got, 0, {.tag = 1});
      require_same(got, Tensor::full({3}, 42, kInt64), "recv on the tag of an earlier timed-out recv");
    }
  });
}

TEST_P(P2P, PendingIrecvCanBeWaitedForWithATimeoutAndAgain) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Tensor payload = pattern(kInt32, 9, 7);
    if (env.rank == 0) {
      env.sync.arrive_and_wait();  // until rank 1 has seen its receive pending
      env.dc.send(payload, 1, {.tag = 2});
      return;
    }
    Tensor got = sentinel(kInt32, {9});
    Request r = env.dc.irecv(got, 0, {.tag = 2});
    require(!r.test(), "Request::test() of an irecv with no sender yet is true");
    require_throws<TimeoutError>([&] { r.wait(milliseconds(50)); }, {}, "Request::wait(50 ms) of a pending irecv");
    require(!r.test(), "Request::test() is true after wait(timeout) gave up, though nothing was sent");
    require(r.error() == nullptr, "Request::error() of a pending irecv is set after wait(timeout) gave up");
    env.sync.arrive_and_wait();
    r.wait();
    require(r.test(), "Request::test() is false after wait() returned");
    require(r.error() == nullptr, "Request::error() is set on a request that succeeded");
    require(r.source() == 0, "Request::source() is " + std::to_string(r.source()) + ", expected 0");
    require(r.bytes() == payload.nbytes(), "Request::bytes() is " + std::to_string(r.bytes()) + ", expected " +
                                               std::to_string(payload.nbytes()));
    require_same(got, payload, "irecv waited for again after a wait(timeout)");
  });
}

TEST_P(P2P, WaitForSaysPendingWithoutThrowingAndReadyOnceTheMessageCame) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Tensor payload = pattern(kInt32, 9, 8);
    if (env.rank == 0) {
      env.sync.arrive_and_wait();  // until rank 1 has seen its receive pending
      env.dc.send(payload, 1, {.tag = 3});
      return;
    }
    Tensor got = sentinel(kInt32, {9});
    Request r = env.dc.irecv(got, 0, {.tag = 3});
    WaitStatus status = WaitStatus::Ready;
    try {
      status = r.wait_for(milliseconds(30));
    } catch (const std::exception& e) {
      require(false, std::string("Request::wait_for(30 ms) of a pending irecv threw: ") + e.what());
    }
    require(status == WaitStatus::Timeout, "Request::wait_for(30 ms) of an irecv with no sender said Ready");
    require(!r.test() && r.error() == nullptr, "an irecv is not left pending after wait_for timed out");
    env.sync.arrive_and_wait();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (r.wait_for(milliseconds(10)) == WaitStatus::Timeout) {
      require(std::chrono::steady_clock::now() < deadline, "Request::wait_for never said Ready after the send");
    }
    require(r.source() == 0 && r.bytes() == payload.nbytes(), "source()/bytes() after wait_for said Ready");
    require_same(got, payload, "irecv waited for with wait_for");
    require(r.wait_for(milliseconds(0)) == WaitStatus::Ready, "wait_for of a finished request is not Ready");
    // A failed request throws its error: wait_for reports errors, never "not yet".
    Tensor other = sentinel(kInt32, {9});
    Request cancelled = env.dc.irecv(other, 0, {.tag = 4});
    cancelled.cancel(std::make_exception_ptr(ValueError("given up on")));
    require_throws<ValueError>([&] { (void)cancelled.wait_for(milliseconds(10)); }, {"given up on"},
                               "wait_for of a cancelled irecv");
  });
}

TEST_P(P2P, CancelledIrecvFailsWithItsReasonAndLeavesTheTagUsable) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 1) {
      Tensor got = sentinel(kInt32, {4});
      Request r = env.dc.irecv(got, 0, {.tag = 5});
      r.cancel(std::make_exception_ptr(ValueError("the reply said no")));
      require(r.test(), "Request::test() is false after cancel()");
      require_error<ValueError>(r.error(), {"the reply said no"}, "a cancelled irecv");
      require_throws<ValueError>([&] { r.wait(); }, {"the reply said no"}, "wait() on a cancelled irecv");
      Request plain = env.dc.irecv(got, 0, {.tag = 6});
      plain.cancel();
      require_throws<Error>([&] { plain.wait(); }, {"cancelled"}, "wait() on an irecv cancelled without a reason");
      r.cancel();  // finished: left alone
      require_error<ValueError>(r.error(), {"the reply said no"}, "a cancelled irecv cancelled again");
    }
    env.sync.arrive_and_wait();
    // The message sent after the cancel goes to the next receive, not the withdrawn one.
    if (env.rank == 0) {
      env.dc.send(Tensor::full({4}, 9, kInt32), 1, {.tag = 5});
    } else {
      Tensor got = sentinel(kInt32, {4});
      env.dc.recv(got, 0, {.tag = 5});
      require_same(got, Tensor::full({4}, 9, kInt32), "recv on the tag of a cancelled irecv");
    }
  });
}

TEST_P(P2P, CollectiveRequestsCannotBeCancelled) {
  run_world(backend(), 2, [](RankEnv& env) {
    Tensor t = Tensor::ones({4});
    Request r = env.dc.iall_reduce(t);
    require_throws<ValueError>([&] { r.cancel(); }, {"collective"}, "cancel() of an all_reduce");
    r.wait();
    // Finished or not: whether cancel() is refused does not depend on timing.
    require_throws<ValueError>([&] { r.cancel(); }, {"collective"}, "cancel() of a finished all_reduce");
  });
}

TEST_P(P2P, FailedRequestReportsItsErrorWithoutThrowingFromTest) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) return;
    Tensor got = sentinel(kInt64, {2});
    Request r = env.dc.irecv(got, 0, {.tag = 3, .timeout = milliseconds(100)});
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!r.test()) {
      require(std::chrono::steady_clock::now() < give_up, "an irecv with a 100 ms timeout is pending after 5 s");
      std::this_thread::sleep_for(milliseconds(5));
    }
    require_error<TimeoutError>(r.error(), {}, "Request::error() of an irecv that timed out");
    require_throws<TimeoutError>([&] { r.wait(); }, {}, "Request::wait() of an irecv that timed out");
    require_throws<TimeoutError>([&] { r.wait(milliseconds(10)); }, {},
                                 "Request::wait(10 ms) of an irecv that timed out");
    require(r.source() == -1 && r.bytes() == 0, "a failed irecv reports a source or byte count");
  });
}

TEST_P(P2P, WaitAllWaitsForEveryRequestAndThrowsTheFirstError) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      env.dc.send(Tensor::full({2}, 5, kInt32), 1, {.tag = 2});
      return;
    }
    Tensor never = sentinel(kInt32, {2});
    Tensor arrives = sentinel(kInt32, {2});
    std::vector<Request> reqs{env.dc.irecv(never, 0, {.tag = 1, .timeout = milliseconds(150)}),
                              env.dc.irecv(arrives, 0, {.tag = 2})};
    require_throws<TimeoutError>([&] { wait_all(reqs); }, {}, "wait_all over a receive that times out");
    require(reqs[1].test() && reqs[1].error() == nullptr,
            "wait_all threw before waiting for the request after the failed one");
    require_same(arrives, Tensor::full({2}, 5, kInt32), "the receive wait_all waited for after a failure");
  });
}

TEST_P(P2P, ManyThreadsShareOneChannel) {
  constexpr int kThreads = 4;
  constexpr int kMessages = 10;
  run_world(backend(), 2, [](RankEnv& env) {
    std::vector<std::exception_ptr> errors(kThreads);
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        try {
          const int peer = 1 - env.rank;
          for (int i = 0; i < kMessages; ++i) {
            // Each thread its own tag; ranks alternate who goes first.
            const Tensor mine = Tensor::full({5}, env.rank * 1000 + k * 100 + i, kInt64);
            Request sent = env.dc.isend(mine, peer, {.tag = k});
            Tensor got = sentinel(kInt64, {5});
            env.dc.recv(got, peer, {.tag = k});
            sent.wait();
            require_same(got, Tensor::full({5}, peer * 1000 + k * 100 + i, kInt64),
                         "thread " + std::to_string(k) + " message " + std::to_string(i));
          }
        } catch (...) {
          errors[static_cast<size_t>(k)] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  });
}

// The host's interrupt check (thd/interrupt.h) ends a blocking receive the way its
// deadline does: the receive is withdrawn before the call returns, so the message
// sent afterwards goes to the next receive, not into the abandoned one's memory.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted by the test's check") {}
};
thread_local bool t_interrupt = false;
void interrupt_this_thread_when_asked() {
  if (t_interrupt) throw Interrupted();
}

TEST_P(P2P, AnInterruptedBlockingReceiveIsWithdrawnAndTakesNoLaterMessage) {
  set_interrupt_check(&interrupt_this_thread_when_asked);
  run_world(backend(), 2, [](RankEnv& env) {
    // Small messages and ones past every backend's eager and direct sizes.
    for (const size_t n : {size_t{8}, size_t{300}, size_t{(1u << 20) + 5}}) {
      const int64_t tag = static_cast<int64_t>(n % 1000);
      std::vector<uint8_t> in(n, 0);
      if (env.rank == 0) {
        t_interrupt = true;
        const milliseconds took = time_of([&] {
          require_throws<Interrupted>([&] { env.dc.recv_bytes(in, 1, {.tag = tag}); }, {"interrupted"},
                                      "an interrupted recv_bytes");
        });
        t_interrupt = false;
        require(took < milliseconds(5000), "the interrupt took " + std::to_string(took.count()) + " ms");
        Tensor got = sentinel(kInt64, {4});
        env.sync.arrive_and_wait();  // rank 1 sends only now
        env.dc.recv_bytes(in, 1, {.tag = tag});
        require(in == std::vector<uint8_t>(n, 'm'), "the receive after the interrupted one got its message");
        // The tensor form too: its storage is kept, and the receive still withdrawn.
        t_interrupt = true;
        require_throws<Interrupted>([&] { env.dc.recv(got, 1, {.tag = tag + 1}); }, {"interrupted"},
                                    "an interrupted recv");
        t_interrupt = false;
        env.sync.arrive_and_wait();
        env.dc.recv(got, 1, {.tag = tag + 1});
        require_same(got, Tensor::full({4}, 7, kInt64), "the recv after the interrupted one");
      } else {
        env.sync.arrive_and_wait();
        env.dc.send_bytes(std::vector<uint8_t>(n, 'm'), 0, {.tag = tag});
        env.sync.arrive_and_wait();
        env.dc.send(Tensor::full({4}, 7, kInt64), 0, {.tag = tag + 1});
      }
    }
  });
  set_interrupt_check(nullptr);
}

THD_CONFORMANCE_BACKENDS(P2P);

}  // namespace
}  // namespace thd::conformance
