// Collective messages over UCX and libfabric (tcp;ofi_rxm) are matched by the
// library itself (pipe/collective_tag.h): they never travel on the pipe's control
// tag, keep their order across the sequence's wrap, and a mismatched collective is
// still named whole by its receiver. Two PipeTransports, ranks as threads.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <thd/store.h>

#include "datachannel/collective_envelope.h"
#include "datachannel/net/auth.h"
#include "datachannel/pipe/pipe_test_util.h"
#include "datachannel/pipe/pipe_transport.h"
#include "datachannel/transport_test_util.h"

#if THD_TEST_UCX
#include "datachannel/ucx/ucx_pipe.h"
#include "datachannel/ucx/ucx_test_settings.h"
#endif
#if THD_TEST_LIBFABRIC
#include "datachannel/libfabric/libfabric_pipe.h"
#endif

namespace thd::test {
namespace {

using namespace std::chrono_literals;
using detail::MessageKind;
using detail::MessageOp;
using detail::pipe::PipeTransport;
using detail::pipe::PipeTuning;

std::unique_ptr<detail::pipe::MessagePipe> make_backend_pipe(const std::string& backend,
                                                             const DataChannelOptions& options) {
#if THD_TEST_UCX
  if (backend == "ucx") return detail::ucx::make_pipe(options, ucx_settings_for("tcp"));
#endif
#if THD_TEST_LIBFABRIC
  if (backend == "libfabric") return detail::libfabric::make_pipe(options, detail::libfabric::PipeSettings{"tcp"});
#endif
  throw std::logic_error("backend not built: " + backend);
}

MessageKind kind(MessageOp op, DType dtype, uint64_t count, int root = -1, ReduceOp reduce = ReduceOp::Sum) {
  return {op, static_cast<uint8_t>(dtype), static_cast<uint8_t>(reduce), root, count};
}

// A message of a collective call on the world group, as launch_collective makes it.
Envelope call(int64_t user_tag, uint32_t seq, const MessageKind& k) {
  return detail::collective_envelope(0, user_tag, seq, k);
}

class NativeCollectives : public ::testing::TestWithParam<std::string> {
 protected:
  void make_ranks(const PipeTuning& tuning0, const PipeTuning& tuning1) {
    auto store = std::make_shared<HashStore>(kLong);
    run_ranks(2, [&](int r) {
      detail::pipe::PipeAuth auth{net::AuthToken(std::string(kToken), "test"), store, kLong};
      ranks_[static_cast<size_t>(r)] = std::make_unique<PipeTransport>(
          make_backend_pipe(GetParam(), options_for(store, r, 2)), auth, r == 0 ? tuning0 : tuning1);
    });
  }
  void TearDown() override {
    run_ranks(2, [&](int r) { ranks_[static_cast<size_t>(r)].reset(); });
  }
  PipeTransport& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

 private:
  std::unique_ptr<PipeTransport> ranks_[2];
};

PipeTuning native(bool on) {
  PipeTuning t;
  t.native_matching = on;
  return t;
}

// A rank that matches natively and one that matches on the control tag do not
// meet on a collective message, either way: it left on the library's matching,
// not on the control tag. One past the layout (a caller's tag of 64) goes on the
// control tag at both and meets.
TEST_P(NativeCollectives, NeverTravelOnTheControlTag) {
  make_ranks(native(true), native(false));
  const Envelope fits = call(0, 3, kind(MessageOp::AllReduce, kFloat32, 16));
  const Envelope past = call(64, 3, kind(MessageOp::AllReduce, kFloat32, 16));
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> out = pattern(64, static_cast<uint32_t>(r)), in(64), in_past(64);
    const RequestPtr recv = irecv(t, in, 1 - r, fits);
    const RequestPtr recv_past = irecv(t, in_past, 1 - r, past);
    const RequestPtr sent = isend(t, out, 1 - r, fits);
    const RequestPtr sent_past = isend(t, out, 1 - r, past);
    ASSERT_TRUE(wait_ok(t, *recv_past));
    EXPECT_EQ(in_past, pattern(64, static_cast<uint32_t>(1 - r)));
    EXPECT_TRUE(holds<TimeoutError>(wait_error(t, *recv, 300ms)))
        << "rank " << r << ": a collective message crossed between native and control matching";
    t.cancel(recv, std::make_exception_ptr(Error("test over")));
    (void)wait_error(t, *sent, 300ms);
    (void)wait_error(t, *sent_past, 300ms);
  });
}

// Natively matched, small and large (the library's rendezvous), to this rank
// too, and in order across the sequence number's wrap (calls 4096 apart share a
// tag).
TEST_P(NativeCollectives, ArriveInOrderAcrossTheSequencesWrap) {
  make_ranks(native(true), native(true));
  const MessageKind k = kind(MessageOp::AllGather, kUInt8, 3 << 20);
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    const size_t sizes[] = {24, size_t{1} << 20, 40};
    const uint32_t seqs[] = {7, 7 + 4096, 7 + 2 * 4096};
    std::vector<std::vector<uint8_t>> in(3);
    std::vector<RequestPtr> recvs, sends;
    std::vector<std::vector<uint8_t>> out(3);
    for (int i = 0; i < 3; ++i) {
      in[static_cast<size_t>(i)].resize(sizes[i]);
      recvs.push_back(irecv(t, in[static_cast<size_t>(i)], 1 - r, call(2, seqs[i], k)));
    }
    for (int i = 0; i < 3; ++i) {
      out[static_cast<size_t>(i)] = pattern(sizes[i], static_cast<uint32_t>(10 * r + i));
      sends.push_back(isend(t, out[static_cast<size_t>(i)], 1 - r, call(2, seqs[i], k)));
    }
    std::vector<uint8_t> self_in(16);
    const std::vector<uint8_t> self_out = pattern(16, 99);
    const RequestPtr self_recv = irecv(t, self_in, r, call(2, 8, k));
    const RequestPtr self_send = isend(t, self_out, r, call(2, 8, k));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(wait_ok(t, *recvs[static_cast<size_t>(i)])) << i;
      EXPECT_EQ(in[static_cast<size_t>(i)], pattern(sizes[i], static_cast<uint32_t>(10 * (1 - r) + i))) << i;
      ASSERT_TRUE(wait_ok(t, *sends[static_cast<size_t>(i)])) << i;
    }
    ASSERT_TRUE(wait_ok(t, *self_recv));
    EXPECT_EQ(self_in, self_out);
    ASSERT_TRUE(wait_ok(t, *self_send));
  });
}

// The receiver names both calls as the control path does: the peer's kind comes
// back from the tag, its count too unless too large for its field.
TEST_P(NativeCollectives, AMismatchedCollectiveIsNamedWhole) {
  make_ranks(native(true), native(true));
  const MessageKind mine = kind(MessageOp::AllReduce, kFloat32, 1000);
  struct Case {
    MessageKind theirs;
    std::string named;
    bool type_error;
  };
  const std::vector<Case> cases = {
      {kind(MessageOp::AllReduce, kFloat32, 1001), "rank 0 called all_reduce(float32, 1001 elements, sum)", false},
      {kind(MessageOp::AllReduce, kInt32, 1000), "rank 0 called all_reduce(int32, 1000 elements, sum)", true},
      {kind(MessageOp::AllReduce, kFloat32, 1000, -1, ReduceOp::Max),
       "rank 0 called all_reduce(float32, 1000 elements, max)", false},
      {kind(MessageOp::Broadcast, kFloat32, 1000, 1), "rank 0 called broadcast(float32, 1000 elements, root 1)",
       false},
      {kind(MessageOp::AllReduce, kFloat32, uint64_t{1} << 33),
       "rank 0 called all_reduce(float32, a count too large for its message tag to name, sum)", false},
  };
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto seq = static_cast<uint32_t>(i);
      std::vector<uint8_t> bytes(32);
      if (r == 0) {
        ASSERT_TRUE(wait_ok(t, *isend(t, bytes, 1, call(1, seq, cases[i].theirs))));
        continue;
      }
      const RequestPtr recv = irecv(t, bytes, 0, call(1, seq, mine));
      const std::exception_ptr error = wait_error(t, *recv);
      std::string message;
      if (cases[i].type_error) {
        ASSERT_TRUE(holds<TypeError>(error, &message)) << what(error);
      } else {
        ASSERT_TRUE(holds<ValueError>(error, &message)) << what(error);
      }
      EXPECT_NE(message.find(cases[i].named + " while this rank called all_reduce(float32, 1000 elements, sum)"),
                std::string::npos)
          << message;
    }
  });
}

std::vector<std::string> built_backends() {
  std::vector<std::string> names;
#if THD_TEST_UCX
  names.push_back("ucx");
#endif
#if THD_TEST_LIBFABRIC
  names.push_back("libfabric");
#endif
  return names;
}

INSTANTIATE_TEST_SUITE_P(Backends, NativeCollectives, ::testing::ValuesIn(built_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace thd::test
