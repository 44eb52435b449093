// Groups: new_group numbering and membership, non-members, groups created in
// different orders on different ranks, and group traffic kept apart from the
// world's (and from other groups').
#include <gtest/gtest.h>

#include <algorithm>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

class Groups : public BackendTest {};

std::string list_str(const std::vector<int>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

TEST_P(Groups, SubgroupNumbersItsMembersInListOrder) {
  const std::vector<int> members = {3, 1, 4};
  run_world(backend(), 5, [&](RankEnv& env) {
    std::shared_ptr<DataChannel> g = env.dc.new_group(members);
    const auto it = std::find(members.begin(), members.end(), env.rank);
    const std::string what = "new_group(" + list_str(members) + ") on world rank " + std::to_string(env.rank);
    if (it == members.end()) {
      require(g->rank() == -1 && !g->is_member(), what + ": a non-member got rank " + std::to_string(g->rank()));
      return;
    }
    require(g->rank() == static_cast<int>(it - members.begin()),
            what + ": rank() is " + std::to_string(g->rank()) + ", expected its position in the list");
    require(g->size() == 3 && g->is_member(), what + ": size() is " + std::to_string(g->size()));
    require(g->world_ranks() == members, what + ": world_ranks() is " + list_str(g->world_ranks()));
    require(g->backend() == env.dc.backend(), what + ": backend() is " + g->backend());

    // Every op on the group, with group ranks: roots 0 and last are world ranks 3 and 4.
    exercise_every_op(*g, 7000);
    check_all_reduce(*g, kFloat64, 7, ReduceOp::Avg, 7100);
  });
}

TEST_P(Groups, NonMembersGetAValueErrorFromEveryOperation) {
  run_world(backend(), 3, [](RankEnv& env) {
    std::shared_ptr<DataChannel> g = env.dc.new_group({0, 2});
    if (env.rank != 1) {
      check_all_reduce(*g, kInt32, 4, ReduceOp::Sum, 1);
      return;
    }
    require(g->rank() == -1 && !g->is_member(), "world rank 1 in new_group({0, 2}) got rank " +
                                                     std::to_string(g->rank()));
    Tensor t = Tensor::zeros({4}, kInt32);
    Tensor out = Tensor::zeros({8}, kInt32);
    std::vector<uint8_t> bytes(4);
    const std::string what = "a non-member's ";
    require_throws<ValueError>([&] { g->all_reduce(t); }, {"member"}, what + "all_reduce");
    require_throws<ValueError>([&] { g->iall_reduce(t); }, {"member"}, what + "iall_reduce");
    require_throws<ValueError>([&] { g->broadcast(t, 0); }, {"member"}, what + "broadcast");
    require_throws<ValueError>([&] { g->reduce(t, 0); }, {"member"}, what + "reduce");
    require_throws<ValueError>([&] { g->all_gather(out, t); }, {"member"}, what + "all_gather");
    require_throws<ValueError>([&] { g->reduce_scatter(t, out); }, {"member"}, what + "reduce_scatter");
    require_throws<ValueError>([&] { g->gather(out, t, 0); }, {"member"}, what + "gather");
    require_throws<ValueError>([&] { g->scatter(t, out, 0); }, {"member"}, what + "scatter");
    require_throws<ValueError>([&] { g->all_to_all(out, out); }, {"member"}, what + "all_to_all");
    require_throws<ValueError>([&] { g->barrier(); }, {"member"}, what + "barrier");
    require_throws<ValueError>([&] { g->send(t, 0); }, {"member"}, what + "send");
    require_throws<ValueError>([&] { g->isend(t, 0); }, {"member"}, what + "isend");
    require_throws<ValueError>([&] { g->recv(t, 0); }, {"member"}, what + "recv");
    require_throws<ValueError>([&] { g->irecv_bytes(bytes, kAnySource); }, {"member"}, what + "irecv_bytes");
    require_throws<ValueError>([&] { g->send_bytes(bytes, 1); }, {"member"}, what + "send_bytes");
    require_throws<ValueError>([&] { g->new_group({0}); }, {"member"}, what + "new_group");
  });
}

TEST_P(Groups, GroupsCreatedInDifferentOrdersOnDifferentRanks) {
  const std::vector<std::vector<int>> groups = {{0, 1, 2}, {1, 2, 3, 4}, {4, 0}, {2, 3}};
  run_world(backend(), 5, [&](RankEnv& env) {
    // Each rank creates the groups it is in, starting at a different one; rank 3
    // also creates {0, 1, 2}, which it is not in (allowed: it gets a non-member).
    std::vector<std::shared_ptr<DataChannel>> made(groups.size());
    for (size_t k = 0; k < groups.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(env.rank)) % groups.size();
      const auto& members = groups[i];
      const bool member = std::count(members.begin(), members.end(), env.rank) > 0;
      if (member || (env.rank == 3 && i == 0)) made[i] = env.dc.new_group(members);
    }
    if (env.rank == 3) {
      require(made[0]->rank() == -1, "world rank 3 in new_group({0, 1, 2}) got rank " + std::to_string(made[0]->rank()));
    }
    // Then the collectives, in one global order (the groups overlap).
    for (size_t i = 0; i < groups.size(); ++i) {
      if (!made[i] || !made[i]->is_member()) continue;
      require(made[i]->world_ranks() == groups[i], "world_ranks() of group " + list_str(groups[i]) + " is " +
                                                       list_str(made[i]->world_ranks()));
      check_all_reduce(*made[i], kInt64, 5, ReduceOp::Sum, 40 + i);
      check_all_gather(*made[i], kFloat32, 3, 50 + i);
    }
  });
}

TEST_P(Groups, GroupTrafficNeverMatchesTheWorlds) {
  run_world(backend(), 3, [](RankEnv& env) {
    // The same members as the world: only the group's own message space keeps
    // its traffic apart.
    std::shared_ptr<DataChannel> g = env.dc.new_group({0, 1, 2});
    std::shared_ptr<DataChannel> g2 = env.dc.new_group({0, 1, 2});

    // Point to point, same peers and tag: each receive gets its own group's message.
    if (env.rank == 0) {
      std::vector<Request> sent;
      sent.push_back(env.dc.isend(Tensor::full({2}, 1, kInt64), 1, {.tag = 5}));
      sent.push_back(g->isend(Tensor::full({2}, 2, kInt64), 1, {.tag = 5}));
      sent.push_back(g2->isend(Tensor::full({2}, 3, kInt64), 1, {.tag = 5}));
      wait_all(sent);
    } else if (env.rank == 1) {
      Tensor got = sentinel(kInt64, {2});
      g2->recv(got, 0, {.tag = 5});
      require_same(got, Tensor::full({2}, 3, kInt64), "recv on the second group");
      g->recv(got, 0, {.tag = 5});
      require_same(got, Tensor::full({2}, 2, kInt64), "recv on the first group");
      env.dc.recv(got, 0, {.tag = 5});
      require_same(got, Tensor::full({2}, 1, kInt64), "recv on the world");
    }

    // Collectives on the three channels, issued in a different order on each rank.
    Tensor a = reduce_operand(ReduceOp::Sum, kInt64, env.rank, 3, 6, 61);
    Tensor b = reduce_operand(ReduceOp::Max, kInt64, env.rank, 3, 6, 62);
    Tensor c = reduce_operand(ReduceOp::Prod, kInt64, env.rank, 3, 6, 63);
    std::vector<Request> reqs(3);
    for (int k = 0; k < 3; ++k) {
      switch ((k + env.rank) % 3) {
        case 0: reqs[0] = env.dc.iall_reduce(a, ReduceOp::Sum); break;
        case 1: reqs[1] = g->iall_reduce(b, ReduceOp::Max); break;
        default: reqs[2] = g2->iall_reduce(c, ReduceOp::Prod); break;
      }
    }
    wait_all(reqs);
    require_same(a, reduce_reference(ReduceOp::Sum, kInt64, 3, 6, 61), "all_reduce on the world");
    require_same(b, reduce_reference(ReduceOp::Max, kInt64, 3, 6, 62), "all_reduce on the first group");
    require_same(c, reduce_reference(ReduceOp::Prod, kInt64, 3, 6, 63), "all_reduce on the second group");
  });
}

TEST_P(Groups, SubgroupCollectivesLeaveTheWorldAlone) {
  run_world(backend(), 5, [](RankEnv& env) {
    std::shared_ptr<DataChannel> g = env.dc.new_group({1, 2, 4});
    // Members keep a group all_reduce outstanding while every rank runs world
    // collectives; both must come out right.
    Tensor mine;
    Request pending;
    if (g->is_member()) {
      mine = reduce_operand(ReduceOp::Sum, kFloat32, g->rank(), 3, 9, 71);
      pending = g->iall_reduce(mine);
    }
    check_all_reduce(env.dc, kFloat32, 9, ReduceOp::Sum, 72);
    check_broadcast(env.dc, kInt32, 9, 4, 73);
    pending.wait();
    if (g->is_member()) {
      require_same(mine, reduce_reference(ReduceOp::Sum, kFloat32, 3, 9, 71), "all_reduce on group {1, 2, 4}");
      check_send_recv_ring(*g, kInt64, 3, 0, 74);
    }
  });
}

TEST_P(Groups, SingletonAndNestedGroups) {
  run_world(backend(), 5, [](RankEnv& env) {
    // A group of one, made by its only member alone.
    std::shared_ptr<DataChannel> alone = env.dc.new_group({env.rank});
    require(alone->rank() == 0 && alone->size() == 1, "new_group({self}) is not a group of one with rank 0");
    check_all_reduce(*alone, kFloat32, 4, ReduceOp::Sum, 80 + env.rank);
    check_broadcast(*alone, kInt64, 4, 0, 85);
    check_all_gather(*alone, kUInt8, 4, 86);

    // A subgroup of a subgroup: ranks are ranks of the parent group.
    std::shared_ptr<DataChannel> sub = env.dc.new_group({1, 2, 3, 4});
    if (!sub->is_member()) return;
    std::shared_ptr<DataChannel> subsub = sub->new_group({3, 0});  // world ranks 4 and 1
    if (!subsub->is_member()) return;
    require(subsub->world_ranks() == std::vector<int>({4, 1}),
            "sub-subgroup world_ranks() is " + list_str(subsub->world_ranks()) + ", expected {4, 1}");
    require(subsub->rank() == (env.rank == 4 ? 0 : 1), "sub-subgroup rank() is " + std::to_string(subsub->rank()));
    check_all_reduce(*subsub, kInt32, 6, ReduceOp::BXor, 87);
    check_send_recv_ring(*subsub, kFloat64, 5, 9, 88);
  });
}

TEST_P(Groups, NewGroupRejectsBadMemberLists) {
  run_world(backend(), 3, [](RankEnv& env) {
    require_throws<ValueError>([&] { env.dc.new_group({1, 1}); }, {"new_group"}, "new_group({1, 1})");
    require_throws<ValueError>([&] { env.dc.new_group({}); }, {"new_group"}, "new_group({})");
    require_throws<IndexError>([&] { env.dc.new_group({0, 7}); }, {"new_group", "7"}, "new_group({0, 7})");
    require_throws<IndexError>([&] { env.dc.new_group({-2, 0}); }, {"new_group", "-2"}, "new_group({-2, 0})");
    // A group's ranks are its own: rank 2 of a group of two is out of range.
    std::shared_ptr<DataChannel> g = env.dc.new_group({0, 2});
    if (g->is_member()) {
      require_throws<IndexError>([&] { g->send(Tensor::zeros({1}), 2); }, {"2"}, "send to rank 2 of a group of 2");
    }
    check_all_reduce(env.dc, kInt32, 3, ReduceOp::Sum, 90);
  });
}

THD_CONFORMANCE_BACKENDS(Groups);

}  // namespace
}  // namespace thd::conformance
