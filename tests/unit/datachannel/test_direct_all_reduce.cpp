// The flagged all_reduce's two forms (collectives/direct_all_reduce.cpp), direct
// and rooted, over the in-process transport: the same bits as recursive doubling
// for every group size and reduce op (float sums depend on the order, and a
// graph's replayed all_reduce must give what the eager one gives), every member's
// word to every member, data untouched when a word is set, n (n - 1) messages
// direct and 2 (n - 1) rooted.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/comm.h"
#include "datachannel/envelope.h"
#include "datachannel/inproc_transport.h"
#include "datachannel/test_util.h"

namespace thd {
namespace {

using detail::Comm;
using detail::MessageKind;
using detail::MessageOp;

class Ranks {
 public:
  explicit Ranks(int size) : inproc_(std::make_shared<test::InprocWorld>(size)), group_(static_cast<size_t>(size)) {
    std::iota(group_.begin(), group_.end(), 0);
    for (int r = 0; r < size; ++r) transports_.push_back(std::make_unique<test::InprocTransport>(inproc_, r));
  }
  int size() const { return static_cast<int>(group_.size()); }
  test::InprocWorld& inproc() { return *inproc_; }

  // Runs `body` on every rank as one collective call; fails the test on any error.
  void run(MessageOp op, DType dtype, size_t count, ReduceOp reduce, const std::function<void(Comm&, int)>& body) {
    MessageKind kind{op, static_cast<uint8_t>(dtype), static_cast<uint8_t>(reduce), -1, count};
    auto errors = test::run_rank_threads(size(), [&](int r) {
      detail::Envelope envelope;
      envelope.context = detail::collective_context(1);
      envelope.tag = call_;
      envelope.kind = kind;
      Comm comm(*transports_[static_cast<size_t>(r)], group_, r, envelope, net::deadline_after(test::kLong),
                std::string(detail::message_op_name(op)));
      body(comm, r);
    });
    ++call_;
    for (size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r]) continue;
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw " << e.what();
      }
    }
  }

 private:
  std::shared_ptr<test::InprocWorld> inproc_;
  std::vector<std::unique_ptr<test::InprocTransport>> transports_;
  std::vector<int> group_;
  int64_t call_ = 0;
};

// One member's call of the flagged all_reduce in either form.
void flagged(bool rooted, Comm& c, void* data, size_t count, DType dtype, ReduceOp op, int64_t word, int64_t* words) {
  if (rooted) {
    detail::flagged_rooted_all_reduce(c, data, count, dtype, op, word, words);
  } else {
    detail::flagged_direct_all_reduce(c, data, count, dtype, op, word, words);
  }
}

class FlaggedAllReduce : public ::testing::TestWithParam<bool> {
 protected:
  bool rooted() const { return GetParam(); }
};

// Values whose float sums differ with the order of the additions.
std::vector<std::vector<float>> order_sensitive(int ranks, size_t count) {
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<std::vector<float>> data(static_cast<size_t>(ranks), std::vector<float>(count));
  for (auto& rank : data) {
    for (float& v : rank) v = std::ldexp(mantissa(gen), exponent(gen));
  }
  return data;
}

TEST_P(FlaggedAllReduce, GivesTheBitsRecursiveDoublingGivesForEveryGroupSizeAndOp) {
  constexpr size_t kCount = 257;
  for (int n : {2, 3, 4, 5, 6, 7, 8}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
      const auto inputs = order_sensitive(n, kCount);
      auto doubled = inputs;
      auto direct = inputs;
      Ranks ranks(n);
      ranks.run(MessageOp::AllReduce, kFloat32, kCount, op, [&](Comm& c, int r) {
        detail::recursive_doubling_all_reduce(c, doubled[static_cast<size_t>(r)].data(), kCount, kFloat32, op);
      });
      std::vector<std::vector<int64_t>> words(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), -1));
      const uint64_t sent_before = ranks.inproc().sent();
      ranks.run(MessageOp::AllReduceFlagged, kFloat32, kCount, op, [&](Comm& c, int r) {
        flagged(rooted(), c, direct[static_cast<size_t>(r)].data(), kCount, kFloat32, op, 0,
                words[static_cast<size_t>(r)].data());
      });
      for (int r = 0; r < n; ++r) {
        const auto& got = direct[static_cast<size_t>(r)];
        const auto& want = doubled[static_cast<size_t>(r)];
        EXPECT_EQ(std::memcmp(got.data(), want.data(), kCount * sizeof(float)), 0)
            << n << " ranks, op " << static_cast<int>(op) << ", rank " << r;
        EXPECT_EQ(words[static_cast<size_t>(r)], std::vector<int64_t>(static_cast<size_t>(n), 0));
      }
      EXPECT_EQ(ranks.inproc().sent() - sent_before, static_cast<uint64_t>(rooted() ? 2 * (n - 1) : n * (n - 1)))
          << n << " ranks";
      EXPECT_EQ(ranks.inproc().pending(), 0u);
    }
  }
  // The order matters for these inputs: a plain left fold differs somewhere.
  const auto inputs = order_sensitive(4, kCount);
  std::vector<float> fold = inputs[0], tree = inputs[0];
  for (size_t i = 0; i < kCount; ++i) {
    fold[i] = ((inputs[0][i] + inputs[1][i]) + inputs[2][i]) + inputs[3][i];
    tree[i] = (inputs[0][i] + inputs[1][i]) + (inputs[2][i] + inputs[3][i]);
  }
  EXPECT_NE(fold, tree);
}

TEST_P(FlaggedAllReduce, EveryMembersWordReachesEveryMemberAndASetWordLeavesTheDataAlone) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 16;
  Ranks ranks(kRanks);
  std::vector<std::vector<int32_t>> data(kRanks);
  for (int r = 0; r < kRanks; ++r) data[static_cast<size_t>(r)].assign(kCount, r + 1);
  std::vector<std::vector<int64_t>> words(kRanks, std::vector<int64_t>(kRanks));
  const std::vector<int64_t> said = {0, 7, 0};  // rank 1 cannot take part
  ranks.run(MessageOp::AllReduceFlagged, kInt32, kCount, ReduceOp::Sum, [&](Comm& c, int r) {
    flagged(rooted(), c, data[static_cast<size_t>(r)].data(), kCount, kInt32, ReduceOp::Sum,
            said[static_cast<size_t>(r)], words[static_cast<size_t>(r)].data());
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(words[static_cast<size_t>(r)], said) << "rank " << r;
    EXPECT_EQ(data[static_cast<size_t>(r)], std::vector<int32_t>(kCount, r + 1)) << "rank " << r;
  }
  // All words 0: the sum, everywhere.
  ranks.run(MessageOp::AllReduceFlagged, kInt32, kCount, ReduceOp::Sum, [&](Comm& c, int r) {
    flagged(rooted(), c, data[static_cast<size_t>(r)].data(), kCount, kInt32, ReduceOp::Sum, 0,
            words[static_cast<size_t>(r)].data());
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(data[static_cast<size_t>(r)], std::vector<int32_t>(kCount, 6));
  EXPECT_EQ(ranks.inproc().pending(), 0u);
}

TEST_P(FlaggedAllReduce, ARankThatNeverComesTimesOutInsteadOfHanging) {
  constexpr size_t kCount = 4;
  auto inproc = std::make_shared<test::InprocWorld>(3);
  std::vector<std::unique_ptr<test::InprocTransport>> transports;
  for (int r = 0; r < 3; ++r) transports.push_back(std::make_unique<test::InprocTransport>(inproc, r));
  const std::vector<int> group = {0, 1, 2};
  const auto start = std::chrono::steady_clock::now();
  auto errors = test::run_rank_threads(3, [&](int r) {
    if (r == 2) return;  // never calls
    detail::Envelope envelope;
    envelope.context = detail::collective_context(1);
    envelope.kind = MessageKind{MessageOp::AllReduceFlagged, static_cast<uint8_t>(kFloat32), 0, rooted() ? 0 : -1, kCount};
    Comm comm(*transports[static_cast<size_t>(r)], group, r, envelope, net::deadline_after(test::kShort),
              "flagged_all_reduce");
    std::vector<float> data(kCount, 1.0f);
    std::vector<int64_t> words(3);
    flagged(rooted(), comm, data.data(), kCount, kFloat32, ReduceOp::Sum, 0, words.data());
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, test::kShort + std::chrono::seconds(2));
  for (int r : {0, 1}) EXPECT_TRUE(errors[static_cast<size_t>(r)]) << "rank " << r << " did not time out";
}

TEST(FlaggedRootedAllReduce, TheRootTellsTheOthersAtOnceOfAMemberItCannotHearFrom) {
  // The members other than the root wait for the root alone: without its word they
  // would notice a lost member only through the group's liveness checks, a slice
  // later, in each collective of a run of them.
  constexpr size_t kCount = 4;
  auto inproc = std::make_shared<test::InprocWorld>(3);
  std::vector<std::unique_ptr<test::InprocTransport>> transports;
  for (int r = 0; r < 3; ++r) transports.push_back(std::make_unique<test::InprocTransport>(inproc, r));
  const std::vector<int> group = {0, 1, 2};
  inproc->kill(2);
  auto call_on = [&](int r, int call) {
    detail::Envelope envelope;
    envelope.context = detail::collective_context(1);
    envelope.tag = call;
    envelope.kind = MessageKind{MessageOp::AllReduceFlagged, static_cast<uint8_t>(kFloat32), 0, 0, kCount};
    Comm comm(*transports[static_cast<size_t>(r)], group, r, envelope, net::deadline_after(test::kLong),
              "flagged_all_reduce");
    std::vector<float> data(kCount, 1.0f);
    std::vector<int64_t> words(3);
    detail::flagged_rooted_all_reduce(comm, data.data(), kCount, kFloat32, ReduceOp::Sum, 0, words.data());
  };
  for (int call = 0; call < 3; ++call) {
    // The root first, on its own, then rank 1: rank 1 learns of rank 2 from the
    // root's answer, whatever the timing of its own liveness checks.
    std::vector<std::exception_ptr> errors(2);
    for (int r : {0, 1}) {
      errors[static_cast<size_t>(r)] = test::run_rank_threads(1, [&](int) { call_on(r, call); })[0];
    }
    for (int r : {0, 1}) {
      ASSERT_TRUE(errors[static_cast<size_t>(r)]) << "call " << call << ": rank " << r << " did not fail";
      try {
        std::rethrow_exception(errors[static_cast<size_t>(r)]);
      } catch (const PeerLost& e) {
        if (r == 1) {
          EXPECT_NE(std::string(e.what()).find("rank 2 of the group could not be heard from by the root"),
                    std::string::npos)
              << e.what();
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw " << e.what();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, FlaggedAllReduce, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Rooted" : "Direct"; });

}  // namespace
}  // namespace thd
