// The process-group free functions with a group argument (thd/process_group.h):
// roots and peers as global ranks, group-rank helpers, every collective's async
// form, the list forms with their errors, and the object collectives. Ranks are
// threads; each passes its world channel (or a subgroup of it) as the group.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include <thd/object_collectives.h>
#include <thd/process_group.h>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

class ProcessGroupApi : public BackendTest {};
class ProcessGroupLists : public BackendWorldTest {};

Group world_of(RankEnv& env) { return env.dc.shared_from_this(); }

Tensor filled(DType dtype, int64_t numel, double value) { return Tensor::full({numel}, value, dtype); }

// Roots and peers are global ranks; the group numbers its members in list order.
TEST_P(ProcessGroupApi, RootsAndPeersAreGlobalRanks) {
  const std::vector<int> members = {4, 1, 3};  // group ranks 0, 1, 2
  run_world(backend(), 5, [&](RankEnv& env) {
    const Group group = env.dc.new_group(members);
    const auto at = std::find(members.begin(), members.end(), env.rank);
    if (at == members.end()) {
      require(get_rank(group) == -1, "get_rank(group) of a non-member is " + std::to_string(get_rank(group)));
      Tensor t = Tensor::zeros({2});
      require_throws<ValueError>([&] { all_reduce(t, ReduceOp::Sum, group); }, {"member"},
                                 "all_reduce on a group this rank is not in");
      return;
    }
    const int me = static_cast<int>(at - members.begin());
    require(get_rank(group) == me && get_world_size(group) == 3,
            "get_rank/get_world_size(group) are " + std::to_string(get_rank(group)) + "/" +
                std::to_string(get_world_size(group)));
    require(get_group_rank(group, 3) == 2 && get_group_rank(group, 4) == 0, "get_group_rank");
    require(get_global_rank(group, 1) == 1 && get_global_rank(group, 0) == 4, "get_global_rank");
    require_throws<ValueError>([&] { get_group_rank(group, 2); }, {"2", "not in the group"},
                               "get_group_rank of a non-member");
    require_throws<ValueError>([&] { get_global_rank(group, 3); }, {"3", "out of range"},
                               "get_global_rank past the group");

    // broadcast from global rank 3 (group rank 2).
    Tensor b = env.rank == 3 ? pattern(kFloat32, 5, seed_of(3, 1)) : sentinel(kFloat32, {5});
    broadcast(b, /*src=*/3, group);
    require_same(b, pattern(kFloat32, 5, seed_of(3, 1)), "broadcast(src=3, group)");

    // all_reduce and reduce to global rank 1 over the group only.
    Tensor s = filled(kInt64, 3, env.rank);
    all_reduce(s, ReduceOp::Sum, group);
    require_same(s, filled(kInt64, 3, 4 + 1 + 3), "all_reduce(group)");
    Tensor m = filled(kInt32, 2, env.rank * 10);
    reduce(m, /*dst=*/1, ReduceOp::Max, group);
    if (env.rank == 1) require_same(m, filled(kInt32, 2, 40), "reduce(dst=1, group)");

    // gather to global rank 4 (group rank 0), scatter from global rank 3.
    Tensor gathered = env.rank == 4 ? sentinel(kInt32, {3 * 2}) : Tensor();
    gather(gathered, filled(kInt32, 2, env.rank), /*dst=*/4, group);
    if (env.rank == 4) {
      require_same(gathered, Tensor::from_vector(std::vector<int32_t>{4, 4, 1, 1, 3, 3}), "gather(dst=4, group)");
    }
    Tensor piece = sentinel(kInt64, {1});
    scatter(piece, env.rank == 3 ? Tensor::from_vector(std::vector<int64_t>{40, 10, 30}) : Tensor(), /*src=*/3,
            group);
    require_same(piece, filled(kInt64, 1, env.rank * 10), "scatter(src=3, group)");

    // Point to point with global ranks: 4 -> 3, and recv reports the global sender.
    if (env.rank == 4) send(filled(kFloat64, 2, 7), /*dst=*/3, group);
    if (env.rank == 3) {
      Tensor got = sentinel(kFloat64, {2});
      const int from = recv(got, kAnySource, group);
      require(from == 4, "recv(group) reported sender " + std::to_string(from) + ", expected global rank 4");
      require_same(got, filled(kFloat64, 2, 7), "send/recv(group)");
    }

    // A root outside the group is refused, naming it; nothing was sent.
    require_throws<ValueError>([&] { broadcast(b, /*src=*/0, group); }, {"src", "0", "not in the group"},
                               "broadcast from a global rank outside the group");
    require_throws<ValueError>([&] { reduce(m, /*dst=*/2, ReduceOp::Sum, group); }, {"dst", "2", "not in the group"},
                               "reduce to a global rank outside the group");
    require_throws<ValueError>([&] { send(b, /*dst=*/0, group); }, {"destination", "0", "not in the group"},
                               "send to a global rank outside the group");
    require_throws<ValueError>([&] { send(b, env.rank, group); }, {"send", "own rank"}, "send to oneself");
    barrier(group);
  });
}

// Every collective's async form returns a Work at once; issued back to back, they
// complete in issue order with the blocking forms' results.
TEST_P(ProcessGroupApi, EveryCollectiveHasAnAsyncForm) {
  run_world(backend(), 3, [](RankEnv& env) {
    const Group group = world_of(env);
    const int n = 3;
    const int r = env.rank;
    Tensor ar = filled(kFloat32, 4, r + 1);
    Tensor bc = r == 2 ? filled(kInt32, 3, 9) : sentinel(kInt32, {3});
    Tensor rd = filled(kInt64, 2, r + 1);
    Tensor ag = sentinel(kInt32, {n});
    Tensor agt = sentinel(kInt32, {n});
    Tensor rs = sentinel(kInt64, {1});
    Tensor rst = sentinel(kInt64, {1});
    Tensor ga = r == 1 ? sentinel(kInt32, {n}) : Tensor();
    Tensor sc = sentinel(kInt32, {1});
    Tensor a2a = sentinel(kInt32, {n});
    std::vector<Tensor> agl = {sentinel(kInt32, {1}), sentinel(kInt32, {2}), sentinel(kInt32, {3})};
    std::vector<Tensor> gal = r == 0 ? std::vector<Tensor>{sentinel(kInt32, {1}), sentinel(kInt32, {1}),
                                                           sentinel(kInt32, {1})}
                                     : std::vector<Tensor>{};
    Tensor scl = sentinel(kInt32, {1});
    Tensor rsl = sentinel(kInt32, {2});
    std::vector<Tensor> a2al = {sentinel(kInt32, {1}), sentinel(kInt32, {1}), sentinel(kInt32, {1})};
    Tensor a2as = sentinel(kInt32, {n});
    const Tensor mine = filled(kInt32, 1, r);
    const Tensor blocks = Tensor::from_vector(std::vector<int64_t>{r * 1, r * 2, r * 3});
    const Tensor row = Tensor::from_vector(std::vector<int32_t>{r * 10 + 0, r * 10 + 1, r * 10 + 2});

    std::vector<Work> works;
    works.push_back(iall_reduce(ar, ReduceOp::Sum, group));
    works.push_back(ibroadcast(bc, 2, group));
    works.push_back(ireduce(rd, 0, ReduceOp::Prod, group));
    works.push_back(iall_gather(ag, mine, group));
    works.push_back(iall_gather_into_tensor(agt, mine, group));
    works.push_back(ireduce_scatter(rs, blocks, ReduceOp::Sum, group));
    works.push_back(ireduce_scatter_tensor(rst, blocks, ReduceOp::Max, group));
    works.push_back(igather(ga, mine, 1, group));
    works.push_back(iscatter(sc, r == 0 ? Tensor::from_vector(std::vector<int32_t>{5, 6, 7}) : Tensor(), 0, group));
    works.push_back(iall_to_all(a2a, row, group));
    works.push_back(iall_gather(agl, filled(kInt32, r + 1, r), group));
    works.push_back(igather(mine, gal, 0, group));
    works.push_back(iscatter(scl, r == 2 ? std::vector<Tensor>{filled(kInt32, 1, 20), filled(kInt32, 1, 21),
                                                               filled(kInt32, 1, 22)}
                                         : std::vector<Tensor>{},
                             2, group));
    works.push_back(ireduce_scatter(rsl, {filled(kInt32, 2, r), filled(kInt32, 2, 2 * r), filled(kInt32, 2, 3 * r)},
                                    ReduceOp::Sum, group));
    works.push_back(iall_to_all(a2al, {filled(kInt32, 1, r * 10), filled(kInt32, 1, r * 10 + 1),
                                       filled(kInt32, 1, r * 10 + 2)},
                                group));
    works.push_back(iall_to_all_single(a2as, row, {}, {}, group));
    works.push_back(ibarrier(group));
    for (size_t i = 0; i < works.size(); ++i) {
      works[i].wait();
      require(works[i].is_completed() && works[i].exception() == nullptr,
              "Work " + std::to_string(i) + " reports is_completed()/exception() wrongly after wait()");
    }
    require_same(ar, filled(kFloat32, 4, 1 + 2 + 3), "iall_reduce");
    require_same(bc, filled(kInt32, 3, 9), "ibroadcast");
    if (r == 0) require_same(rd, filled(kInt64, 2, 1 * 2 * 3), "ireduce");
    const Tensor ranks = Tensor::from_vector(std::vector<int32_t>{0, 1, 2});
    require_same(ag, ranks, "iall_gather (flat)");
    require_same(agt, ranks, "iall_gather_into_tensor");
    require_same(rs, filled(kInt64, 1, (0 + 1 + 2) * (r + 1)), "ireduce_scatter (flat)");
    require_same(rst, filled(kInt64, 1, 2 * (r + 1)), "ireduce_scatter_tensor");
    if (r == 1) require_same(ga, ranks, "igather (flat)");
    require_same(sc, filled(kInt32, 1, 5 + r), "iscatter (flat)");
    require_same(a2a, Tensor::from_vector(std::vector<int32_t>{0 + r, 10 + r, 20 + r}), "iall_to_all (flat)");
    for (int i = 0; i < n; ++i) require_same(agl[static_cast<size_t>(i)], filled(kInt32, i + 1, i), "iall_gather (list)");
    if (r == 0) {
      for (int i = 0; i < n; ++i) require_same(gal[static_cast<size_t>(i)], filled(kInt32, 1, i), "igather (list)");
    }
    require_same(scl, filled(kInt32, 1, 20 + r), "iscatter (list)");
    require_same(rsl, filled(kInt32, 2, (r + 1) * (0 + 1 + 2)), "ireduce_scatter (list)");
    for (int i = 0; i < n; ++i) {
      require_same(a2al[static_cast<size_t>(i)], filled(kInt32, 1, i * 10 + r), "iall_to_all (list)");
    }
    require_same(a2as, Tensor::from_vector(std::vector<int32_t>{0 + r, 10 + r, 20 + r}), "iall_to_all_single");
  });
}

// A Work that failed says so without throwing: is_completed() and exception().
TEST_P(ProcessGroupApi, AFailedWorkReportsItsException) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Group pair = env.dc.new_group({0, 1});
    if (env.rank == 0) {
      // Rank 1 never joins this barrier: it fails at its deadline.
      Work w = ibarrier(pair, {.tag = 9, .timeout = milliseconds(300)});
      require_throws<TimeoutError>([&] { w.wait(); }, {"barrier"}, "ibarrier without the peer");
      require(w.is_completed(), "a failed Work is not is_completed()");
      require_error<TimeoutError>(w.exception(), {"barrier"}, "Work::exception() of a timed-out ibarrier");
    }
    env.sync.arrive_and_wait();
    barrier(pair);  // tag 0 is untouched
  });
}

// The list forms at every world size, with sizes that differ between ranks where
// torch allows it.
TEST_P(ProcessGroupLists, ListFormsMatchTheirReference) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    const Group group = world_of(env);
    const int n = env.size;
    const int r = env.rank;
    const int last = n - 1;
    const auto idx = [](int i) { return static_cast<size_t>(i); };

    // all_gather: rank i contributes i + 1 elements (rank 0's... of a different count).
    std::vector<Tensor> gathered;
    for (int i = 0; i < n; ++i) gathered.push_back(sentinel(kFloat64, {i + 1}));
    all_gather(gathered, pattern(kFloat64, r + 1, seed_of(r, 11)), group);
    for (int i = 0; i < n; ++i) {
      require_same(gathered[idx(i)], pattern(kFloat64, i + 1, seed_of(i, 11)), "all_gather list entry " + std::to_string(i));
    }
    // Equal sizes, 2-d entries.
    std::vector<Tensor> rows;
    for (int i = 0; i < n; ++i) rows.push_back(sentinel(kInt32, {2, 3}));
    all_gather(rows, pattern(kInt32, 6, seed_of(r, 12)).reshape({2, 3}), group);
    for (int i = 0; i < n; ++i) require_same(rows[idx(i)], pattern(kInt32, 6, seed_of(i, 12)), "all_gather 2-d entry");

    // gather to the last rank, scatter from rank 0.
    std::vector<Tensor> at_last;
    if (r == last) {
      for (int i = 0; i < n; ++i) at_last.push_back(sentinel(kInt64, {4}));
    }
    gather(pattern(kInt64, 4, seed_of(r, 13)), at_last, last, group);
    for (size_t i = 0; i < at_last.size(); ++i) {
      require_same(at_last[i], pattern(kInt64, 4, seed_of(static_cast<int>(i), 13)), "gather list entry");
    }
    std::vector<Tensor> to_scatter;
    if (r == 0) {
      // Strided entries: scatter reads them as they are.
      for (int i = 0; i < n; ++i) to_scatter.push_back(pattern(kFloat32, 6, seed_of(i, 14)).reshape({2, 3}).t());
    }
    Tensor piece = sentinel(kFloat32, {3, 2});
    scatter(piece, to_scatter, 0, group);
    require_same(piece, pattern(kFloat32, 6, seed_of(r, 14)).reshape({2, 3}).t().contiguous(), "scatter list");

    // reduce_scatter: rank r's output is the sum over ranks j of j's input_list[r].
    std::vector<Tensor> inputs;
    for (int i = 0; i < n; ++i) inputs.push_back(filled(kInt64, 3, 100 * r + i));
    Tensor reduced = sentinel(kInt64, {3});
    reduce_scatter(reduced, inputs, ReduceOp::Sum, group);
    require_same(reduced, filled(kInt64, 3, 100 * (n * (n - 1) / 2) + n * r), "reduce_scatter list");

    // all_to_all: rank i sends rank j (i + 2j) % 3 + 1 elements valued 10i + j.
    const auto count = [](int i, int j) { return static_cast<int64_t>((i + 2 * j) % 3 + 1); };
    std::vector<Tensor> outs;
    std::vector<Tensor> ins;
    for (int j = 0; j < n; ++j) {
      ins.push_back(filled(kFloat32, count(r, j), 10 * r + j));
      outs.push_back(sentinel(kFloat32, {count(j, r)}));
    }
    all_to_all(outs, ins, group);
    for (int j = 0; j < n; ++j) require_same(outs[idx(j)], filled(kFloat32, count(j, r), 10 * j + r), "all_to_all list");

    // all_to_all_single with splits (rows of 2) and without.
    std::vector<int64_t> in_splits;
    std::vector<int64_t> out_splits;
    std::vector<Tensor> in_parts;
    std::vector<Tensor> expected;
    for (int j = 0; j < n; ++j) {
      in_splits.push_back(count(r, j));
      out_splits.push_back(count(j, r));
      in_parts.push_back(filled(kInt32, 2 * count(r, j), 10 * r + j));
      expected.push_back(filled(kInt32, 2 * count(j, r), 10 * j + r));
    }
    const int64_t in_rows = std::accumulate(in_splits.begin(), in_splits.end(), int64_t{0});
    const int64_t out_rows = std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0});
    Tensor single_out = sentinel(kInt32, {out_rows, 2});
    all_to_all_single(single_out, cat(in_parts, 0).reshape({in_rows, 2}), out_splits, in_splits, group);
    require_same(single_out, cat(expected, 0), "all_to_all_single with splits");
    Tensor even_out = sentinel(kInt32, {n, 2});
    std::vector<int32_t> even_in;
    for (int j = 0; j < n; ++j) even_in.insert(even_in.end(), {10 * r + j, 10 * r + j});
    all_to_all_single(even_out, Tensor::from_vector(even_in).reshape({n, 2}), {}, {}, group);
    std::vector<int32_t> even_expected;
    for (int j = 0; j < n; ++j) even_expected.insert(even_expected.end(), {10 * j + r, 10 * j + r});
    require_same(even_out, Tensor::from_vector(even_expected), "all_to_all_single in equal parts");
  });
}

// Wrong lists fail on the calling rank with a ValueError naming the list and the
// position, before anything is sent; the group works afterwards.
TEST_P(ProcessGroupApi, WrongListsNameThePosition) {
  run_world(backend(), 3, [](RankEnv& env) {
    const Group group = world_of(env);
    const int r = env.rank;
    const std::string own = "tensor_list[" + std::to_string(r) + "]";
    const Tensor t = Tensor::zeros({2}, kFloat32);
    const auto list = [](std::vector<Tensor> l) { return l; };
    require_throws<ValueError>([&] { all_gather(list({Tensor::zeros({2}), Tensor::zeros({2})}), t, group); },
                               {"tensor_list", "2 tensors", "3"}, "all_gather with a short list");
    std::vector<Tensor> wrong_dtype = {Tensor::zeros({2}), Tensor::zeros({2}), Tensor::zeros({2})};
    wrong_dtype[1] = Tensor::zeros({2}, kInt64);
    require_throws<ValueError>([&] { all_gather(wrong_dtype, t, group); }, {"tensor_list[1]", "int64", "float32"},
                               "all_gather with a wrong dtype at position 1");
    std::vector<Tensor> wrong_own = {Tensor::zeros({2}), Tensor::zeros({2}), Tensor::zeros({2})};
    wrong_own[static_cast<size_t>(r)] = Tensor::zeros({5});
    require_throws<ValueError>([&] { all_gather(wrong_own, t, group); }, {own, "5 elements"},
                               "all_gather with this rank's entry of the wrong size");
    std::vector<Tensor> strided_out = {Tensor::zeros({4}), Tensor::zeros({4}), Tensor::zeros({2, 2}).t()};
    require_throws<ValueError>([&] { all_gather(strided_out, Tensor::zeros({2, 2}), group); },
                               {"tensor_list[2]", "contiguous"}, "all_gather into a strided entry");
    if (r != 0) {
      require_throws<ValueError>([&] { gather(t, list({Tensor::zeros({2})}), 0, group); },
                                 {"gather_list", "not the destination"}, "gather_list on a non-destination rank");
    } else {
      require_throws<ValueError>([&] { gather(t, list({Tensor::zeros({2}), Tensor::zeros({3}), Tensor::zeros({2})}),
                                              0, group); },
                                 {"gather_list[1]", "3 elements"}, "gather_list with a wrong size at position 1");
      require_throws<ValueError>([&] { gather(t, list({}), 0, group); }, {"gather_list", "0 tensors"},
                                 "an empty gather_list on the destination");
    }
    Tensor out = Tensor::zeros({2});
    require_throws<ValueError>(
        [&] { reduce_scatter(out, list({Tensor::zeros({2}), Tensor::zeros({2}, kInt32), Tensor::zeros({2})}),
                             ReduceOp::Sum, group); },
        {"input_list[1]", "int32"}, "reduce_scatter with a wrong dtype at position 1");
    require_throws<ValueError>(
        [&] { all_to_all(list({Tensor::zeros({1}), Tensor::zeros({1})}), list({Tensor::zeros({1}), Tensor::zeros({1}),
                                                                             Tensor::zeros({1})}),
                         group); },
        {"output_tensor_list", "2 tensors"}, "all_to_all with a short output list");
    Tensor rows = Tensor::zeros({4, 2});
    Tensor rows_out = Tensor::zeros({4, 2});
    require_throws<ValueError>([&] { all_to_all_single(rows_out, rows, {}, {1, 1, 1}, group); },
                               {"input_split_sizes", "3 rows", "4"}, "all_to_all_single splits that do not add up");
    require_throws<ValueError>([&] { all_to_all_single(rows_out, rows, {}, {}, group); },
                               {"4 rows", "3 equal parts"}, "all_to_all_single without splits of uneven rows");
    require_throws<ValueError>([&] { all_to_all_single(rows_out, rows, {2, 1, 1}, {1, -1, 4}, group); },
                               {"input_split_sizes[1]", "-1"}, "all_to_all_single with a negative split");
    // Nothing was issued: the group's next collective is the first one.
    check_all_reduce(env.dc, kInt32, 4, ReduceOp::Sum, 31);
  });
}

// A list entry of another rank's size is found once the sizes are exchanged: the
// rank whose list is wrong fails naming the entry, the others complete.
TEST_P(ProcessGroupApi, AllGatherListOfAnotherRanksWrongSizeFailsOnlyThere) {
  run_world(backend(), 2, [](RankEnv& env) {
    const Group group = world_of(env);
    std::vector<Tensor> list = {sentinel(kInt32, {3}), sentinel(kInt32, {3})};
    if (env.rank == 0) list[1] = sentinel(kInt32, {4});  // rank 1 sends 3
    const Tensor mine = filled(kInt32, 3, env.rank + 1);
    if (env.rank == 0) {
      require_throws<ValueError>([&] { all_gather(list, mine, group); }, {"tensor_list[1]", "4 elements", "sent 3"},
                                 "all_gather into an entry of the wrong size for rank 1");
      require_same(list[1], sentinel(kInt32, {4}), "the wrong entry is left as it was");
    } else {
      all_gather(list, mine, group);
      require_same(list[0], filled(kInt32, 3, 1), "all_gather on the rank with the right list");
    }
    check_all_reduce(env.dc, kInt64, 3, ReduceOp::Sum, 32);
  });
}

// ---- object collectives ------------------------------------------------------------------

struct Point {
  int32_t x = 0;
  std::string name;
  bool operator==(const Point&) const = default;
};

}  // namespace
}  // namespace thd::conformance

// The documented hook: a user type's codec, in namespace thd.
template <>
struct thd::ObjectCodec<thd::conformance::Point> {
  static std::vector<uint8_t> encode(const thd::conformance::Point& p) {
    std::vector<uint8_t> b(sizeof p.x);
    std::memcpy(b.data(), &p.x, sizeof p.x);
    b.insert(b.end(), p.name.begin(), p.name.end());
    return b;
  }
  static thd::conformance::Point decode(std::span<const uint8_t> b) {
    if (b.size() < sizeof(int32_t)) throw thd::ValueError("a Point needs at least 4 bytes");
    thd::conformance::Point p;
    std::memcpy(&p.x, b.data(), sizeof p.x);
    p.name.assign(b.begin() + sizeof p.x, b.end());
    return p;
  }
};

namespace thd::conformance {
namespace {

std::string text_of(int rank) { return std::string(static_cast<size_t>(rank) * 3, static_cast<char>('a' + rank)); }

TEST_P(ProcessGroupApi, ObjectCollectives) {
  run_world(backend(), 3, [](RankEnv& env) {
    const Group group = world_of(env);
    const int r = env.rank;

    std::string config = r == 2 ? "lr=0.1;epochs=3" : "stale";
    broadcast_object(config, 2, group);
    require(config == "lr=0.1;epochs=3", "broadcast_object(std::string) gave '" + config + "'");

    std::vector<std::string> names;
    all_gather_object(names, text_of(r), group);  // rank 0's is empty
    require(names == std::vector<std::string>{text_of(0), text_of(1), text_of(2)}, "all_gather_object(std::string)");

    std::vector<double> at_one;
    gather_object(0.5 * r, at_one, 1, group);
    if (r == 1) {
      require(at_one == std::vector<double>{0.0, 0.5, 1.0}, "gather_object(double) on the destination");
    } else {
      require(at_one.empty(), "gather_object wrote the list of a rank that is not the destination");
    }

    Point p;
    scatter_object(p, r == 0 ? std::vector<Point>{{1, "one"}, {2, ""}, {3, "three"}} : std::vector<Point>{}, 0, group);
    const std::vector<Point> sent = {{1, "one"}, {2, ""}, {3, "three"}};
    require(p == sent[static_cast<size_t>(r)], "scatter_object(Point) through a user codec");

    std::vector<uint8_t> blob = r == 1 ? std::vector<uint8_t>{0, 255, 7} : std::vector<uint8_t>{9};
    broadcast_object(blob, 1, group);
    require(blob == std::vector<uint8_t>({0, 255, 7}), "broadcast_object(bytes)");

    std::vector<Point> list = r == 0 ? std::vector<Point>{{5, "five"}, {6, "six"}} : std::vector<Point>{};
    broadcast_object_list(list, 0, group);
    require(list == std::vector<Point>({{5, "five"}, {6, "six"}}), "broadcast_object_list(Point)");

    // A source list of the wrong length fails on every rank, not only the source.
    std::string out;
    require_throws<ValueError>(
        [&] { scatter_object(out, r == 0 ? std::vector<std::string>{"x", "y"} : std::vector<std::string>{}, 0, group); },
        {"scatter_object"}, "scatter_object with a source list of 2 for 3 ranks");
    check_all_reduce(env.dc, kInt32, 2, ReduceOp::Sum, 33);
  });
}

TEST_P(ProcessGroupApi, ObjectCollectivesOnASubgroupWithGlobalRoots) {
  run_world(backend(), 4, [](RankEnv& env) {
    const Group odds = env.dc.new_group({3, 1});
    if (get_rank(odds) < 0) {
      std::string s;
      require_throws<ValueError>([&] { broadcast_object(s, 3, odds); }, {"broadcast_object", "not a member"},
                                 "broadcast_object on a group this rank is not in");
      return;
    }
    std::string s = env.rank == 3 ? "from three" : "";
    broadcast_object(s, 3, odds);
    require(s == "from three", "broadcast_object(src=3) on {3, 1} gave '" + s + "'");
    std::vector<int64_t> all;
    all_gather_object(all, int64_t{env.rank} * 100, odds);
    require(all == std::vector<int64_t>({300, 100}), "all_gather_object on {3, 1}: group-rank order");
  });
}

THD_CONFORMANCE_BACKENDS(ProcessGroupApi);
THD_CONFORMANCE_BACKENDS_X_WORLDS(ProcessGroupLists, kWorldSizes);

}  // namespace
}  // namespace thd::conformance
