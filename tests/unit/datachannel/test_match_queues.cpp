// The matching queues both tcp and the message-library backends use: MPI order,
// and no state left behind by the nodes and buckets they keep for reuse.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/matching.h"

namespace thd::detail {
namespace {

Envelope env(int64_t tag, uint32_t context = 0) { return Envelope{context, tag, {}}; }

std::shared_ptr<RequestState> request(const char* what = "recv") {
  return std::make_shared<RequestState>(what, net::Deadline::max(), nullptr, 0);
}

PostedRecv posted(std::shared_ptr<RequestState> r, int source, int64_t tag, uint32_t context = 0) {
  return PostedRecv{std::move(r), {}, source, env(tag, context)};
}

TEST(MatchQueues, ReceivesMatchInPostingOrderPerSourceAndAnySource) {
  MatchQueues q;
  auto from1 = request(), any = request(), from2 = request();
  q.post(posted(from1, 1, 5));
  q.post(posted(any, kAnySource, 5));
  q.post(posted(from2, 2, 5));
  EXPECT_EQ(q.posted_count(), 3u);

  auto a = q.take_posted(2, env(5));  // the any-source receive was posted before rank 2's
  ASSERT_TRUE(a);
  EXPECT_EQ(a->request, any);
  auto b = q.take_posted(2, env(5));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->request, from2);
  EXPECT_FALSE(q.take_posted(2, env(5)));
  EXPECT_FALSE(q.take_posted(1, env(6)));       // another tag
  EXPECT_FALSE(q.take_posted(1, env(5, 2)));    // another context
  auto c = q.take_posted(1, env(5));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->request, from1);
  EXPECT_EQ(q.posted_count(), 0u);
}

// A finished receive is dropped on the way, whether it is the one posted alone (the
// solo receive) or waits in its bucket (behind a solo receive of another tag).
TEST(MatchQueues, FinishedReceivesAreSkipped) {
  for (const bool behind_solo : {false, true}) {
    MatchQueues q;
    auto elsewhere = request(), failed = request(), live = request();
    if (behind_solo) q.post(posted(elsewhere, 0, 2));
    q.post(posted(failed, 0, 1));
    q.post(posted(live, 0, 1));
    failed->fail(std::make_exception_ptr(Error("cancelled")));
    auto m = q.take_posted(0, env(1));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->request, live);
    EXPECT_EQ(q.posted_count(), behind_solo ? 1u : 0u);
  }
}

TEST(MatchQueues, ReusedNodesHoldNoRequest) {
  MatchQueues q;
  std::weak_ptr<RequestState> taken_weak, withdrawn_weak;
  {
    auto taken = request(), withdrawn = request();
    taken_weak = taken;
    withdrawn_weak = withdrawn;
    q.post(posted(taken, 0, 1));
    q.post(posted(withdrawn, 0, 2));
    EXPECT_TRUE(q.take_posted(0, env(1)));
    EXPECT_TRUE(q.withdraw(withdrawn.get()));
  }
  // The queues keep the list and map nodes for the next receives, not their requests.
  EXPECT_TRUE(taken_weak.expired());
  EXPECT_TRUE(withdrawn_weak.expired());

  // A reused node carries the new receive, not the old one's fields.
  auto next = request();
  q.post(posted(next, 3, 9));
  EXPECT_FALSE(q.take_posted(0, env(9)));
  auto m = q.take_posted(3, env(9));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->request, next);
  EXPECT_EQ(m->source, 3);
  EXPECT_FALSE(q.withdraw(next.get()));  // taken already: nothing to withdraw
}

TEST(MatchQueues, WithdrawFindsTheReceiveOfItsRequestOnly) {
  MatchQueues q;
  auto a = request(), b = request();
  q.post(posted(a, 0, 1));
  q.post(posted(b, 0, 1));
  auto w = q.withdraw(b.get());
  ASSERT_TRUE(w);
  EXPECT_EQ(w->request, b);
  EXPECT_FALSE(q.withdraw(b.get()));
  auto m = q.take_posted(0, env(1));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->request, a);
}

TEST(MatchQueues, KeysThatComeAndGoLeaveOnlyAFewEmptyBuckets) {
  MatchQueues q;
  // Collective traffic: a new tag (sequence number) per call.
  for (int64_t tag = 0; tag < 1000; ++tag) {
    auto r = request();
    q.post(posted(r, 1, tag, 1));
    ASSERT_TRUE(q.take_posted(1, env(tag, 1)));
    UnexpectedMessage m;
    m.source = 1;
    m.header.envelope = env(tag + 5000, 1);
    q.erase_unexpected(q.add_unexpected(std::move(m)));
  }
  EXPECT_LE(q.bucket_count(), 8u);
  EXPECT_EQ(q.posted_count(), 0u);
  EXPECT_EQ(q.unexpected_count(), 0u);

  // A kept empty bucket serves its key again, in order.
  auto first = request(), second = request();
  q.post(posted(first, 1, 999, 1));
  q.post(posted(second, 1, 999, 1));
  EXPECT_EQ(q.take_posted(1, env(999, 1))->request, first);
  EXPECT_EQ(q.take_posted(1, env(999, 1))->request, second);
}

TEST(MatchQueues, WithdrawIfAndEraseIfEmptyEveryBucketTheyTouch) {
  MatchQueues q;
  std::vector<std::shared_ptr<RequestState>> keep;
  for (int64_t tag = 0; tag < 50; ++tag) {
    keep.push_back(request());
    q.post(posted(keep.back(), static_cast<int>(tag % 3), tag));
    UnexpectedMessage m;
    m.source = static_cast<int>(tag % 3);
    m.header.envelope = env(tag + 100);
    q.add_unexpected(std::move(m));
  }
  // Empty the kept set first, so withdraw_if must not erase while iterating.
  for (int64_t tag = 200; tag < 220; ++tag) {
    auto r = request();
    q.post(posted(r, 0, tag));
    ASSERT_TRUE(q.take_posted(0, env(tag)));
  }
  const auto from2 = q.withdraw_if([](const PostedRecv& r) { return r.source == 2; });
  EXPECT_EQ(from2.size(), 16u);
  q.erase_unexpected_if([](const UnexpectedMessage& m) { return m.source == 2; });
  EXPECT_EQ(q.posted_count(), 34u);
  EXPECT_EQ(q.unexpected_count(), 34u);
  q.withdraw_if([](const PostedRecv&) { return true; });
  q.erase_unexpected_if([](const UnexpectedMessage&) { return true; });
  EXPECT_EQ(q.posted_count(), 0u);
  EXPECT_EQ(q.unexpected_count(), 0u);
  EXPECT_LE(q.bucket_count(), 8u);
}

// The queues remember the last bucket they used; one erased under it must not be
// used again, whichever call erased it.
TEST(MatchQueues, ABucketErasedAfterUseIsNeverUsedAgain) {
  MatchQueues q;
  auto first = request();
  q.post(posted(first, 1, 7));
  q.withdraw_if([](const PostedRecv&) { return true; });  // erases tag 7's bucket
  EXPECT_EQ(q.find_unexpected(1, env(7)), nullptr);
  EXPECT_FALSE(q.take_posted(1, env(7)));
  auto second = request();
  q.post(posted(second, 1, 7));
  auto taken = q.take_posted(1, env(7));
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->request, second);

  UnexpectedMessage m;
  m.source = 2;
  m.header.envelope = env(9);
  q.add_unexpected(std::move(m));
  q.erase_unexpected_if([](const UnexpectedMessage&) { return true; });  // erases tag 9's
  EXPECT_EQ(q.find_unexpected(2, env(9)), nullptr);
  UnexpectedMessage again;
  again.source = 2;
  again.header.envelope = env(9);
  q.add_unexpected(std::move(again));
  UnexpectedMessage* found = q.find_unexpected(2, env(9));
  ASSERT_NE(found, nullptr);
  q.erase_unexpected(found);
  EXPECT_EQ(q.unexpected_count(), 0u);
  // Buckets evicted from the kept set (more keys than it holds) leave too.
  for (int64_t tag = 100; tag < 130; ++tag) {
    auto r = request();
    q.post(posted(r, 0, tag));
    ASSERT_TRUE(q.take_posted(0, env(tag)));
    auto other = request();
    q.post(posted(other, 0, 100));
    ASSERT_TRUE(q.take_posted(0, env(100)));
  }
  EXPECT_EQ(q.posted_count(), 0u);
  EXPECT_LE(q.bucket_count(), 8u);
}

TEST(MatchQueues, WithdrawFindsAReceiveAmongManyKeys) {
  MatchQueues q;
  std::vector<std::shared_ptr<RequestState>> keep;
  for (int64_t tag = 0; tag < 40; ++tag) {
    keep.push_back(request());
    q.post(posted(keep.back(), 1, tag));
  }
  EXPECT_TRUE(q.withdraw(keep[23].get()));
  EXPECT_FALSE(q.withdraw(keep[23].get()));
  EXPECT_EQ(q.posted_count(), 39u);
  EXPECT_FALSE(q.take_posted(1, env(23)));
  EXPECT_TRUE(q.take_posted(1, env(24)));
}

TEST(MatchQueues, UnexpectedMessagesMatchOldestFirstAndBySource) {
  MatchQueues q;
  for (int i = 0; i < 3; ++i) {
    UnexpectedMessage m;
    m.source = i == 1 ? 2 : 1;
    m.header.envelope = env(7);
    m.header.payload_bytes = static_cast<uint64_t>(i);
    q.add_unexpected(std::move(m));
  }
  UnexpectedMessage* any = q.find_unexpected(kAnySource, env(7));
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(any->header.payload_bytes, 0u);
  UnexpectedMessage* from2 = q.find_unexpected(2, env(7));
  ASSERT_NE(from2, nullptr);
  EXPECT_EQ(from2->header.payload_bytes, 1u);
  q.erase_unexpected(any);
  UnexpectedMessage* next1 = q.find_unexpected(1, env(7));
  ASSERT_NE(next1, nullptr);
  EXPECT_EQ(next1->header.payload_bytes, 2u);
  EXPECT_EQ(q.find_unexpected(1, env(8)), nullptr);
}

// The receive posted while none is (kept apart, "solo") is the oldest: a message
// looks at it first, and receives posted after it, or while it is taken, keep
// their place behind the older ones.
TEST(MatchQueues, TheReceivePostedAloneKeepsItsPlaceInPostingOrder) {
  MatchQueues q;
  auto first = request(), any = request(), later = request();
  q.post(posted(first, 1, 5));
  EXPECT_TRUE(q.has_solo());
  q.post(posted(any, kAnySource, 5));
  EXPECT_EQ(q.posted_count(), 2u);

  // Rank 2's message: the first receive (rank 1's) does not take it, the next does.
  auto a = q.take_posted(2, env(5));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->request, any);
  EXPECT_TRUE(q.has_solo());

  // Rank 1's message goes to the first receive; one posted now is not "alone"
  // while another waits, and a receive posted after that one comes after it.
  q.post(posted(any, kAnySource, 5));
  auto b = q.take_posted(1, env(5));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->request, first);
  EXPECT_FALSE(q.has_solo());
  q.post(posted(later, 1, 5));
  EXPECT_FALSE(q.has_solo());
  auto c = q.take_posted(1, env(5));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->request, any);
  auto d = q.take_posted(1, env(5));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->request, later);
  EXPECT_EQ(q.posted_count(), 0u);
  EXPECT_FALSE(q.take_posted(1, env(5)));
}

TEST(MatchQueues, TheReceivePostedAloneMatchesOnlyItsKeyAndSource) {
  MatchQueues q;
  auto r = request();
  q.post(posted(r, 3, 7, 1));
  EXPECT_FALSE(q.take_posted(3, env(7, 2)));  // another context
  EXPECT_FALSE(q.take_posted(3, env(8, 1)));  // another tag
  EXPECT_FALSE(q.take_posted(4, env(7, 1)));  // another source
  bool used = false;
  EXPECT_FALSE(q.take_posted_with(4, env(7, 1), [&](const PostedRecv&) { used = true; }));
  EXPECT_FALSE(used);
  EXPECT_TRUE(q.take_posted_with(3, env(7, 1), [&](const PostedRecv& m) { used = m.request == r; }));
  EXPECT_TRUE(used);
  EXPECT_EQ(q.posted_count(), 0u);
  EXPECT_EQ(q.bucket_count(), 0u);  // it never needed a bucket
}

TEST(MatchQueues, TheReceivePostedAloneIsWithdrawnAndLetGo) {
  MatchQueues q;
  std::weak_ptr<RequestState> gone;
  {
    auto alone = request(), other = request();
    gone = alone;
    q.post(posted(alone, 0, 1));
    q.post(posted(other, 0, 2));
    EXPECT_FALSE(q.withdraw(request().get()));
    auto w = q.withdraw(alone.get());
    ASSERT_TRUE(w);
    EXPECT_EQ(w->request, alone);
    EXPECT_FALSE(q.has_solo());
    EXPECT_EQ(q.posted_count(), 1u);
    EXPECT_TRUE(q.withdraw(other.get()));
  }
  EXPECT_TRUE(gone.expired());  // the queues hold no request they let go

  // withdraw_if takes it with the others, oldest first.
  auto x = request(), y = request(), z = request();
  q.post(posted(x, 1, 1));
  q.post(posted(y, 2, 1));
  q.post(posted(z, 1, 3));
  auto out = q.withdraw_if([](const PostedRecv& r) { return r.source == 1; });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].request, x);
  EXPECT_EQ(out[1].request, z);
  EXPECT_EQ(q.posted_count(), 1u);
  EXPECT_FALSE(q.has_solo());
  EXPECT_TRUE(q.take_posted(2, env(1)));
}

}  // namespace
}  // namespace thd::detail
