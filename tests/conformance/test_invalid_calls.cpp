// Calls the contract refuses, made the same way on every rank: each must fail on
// the calling rank, before any message is sent, with the right error type and a
// message that names what was wrong; the channel must work normally afterwards.
#include <gtest/gtest.h>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

class InvalidCalls : public BackendTest {};

// A [4, 3] tensor viewed as [3, 4]: not contiguous.
Tensor strided(DType dtype) { return Tensor::zeros({4, 3}, dtype).transpose(0, 1); }

TEST_P(InvalidCalls, PointToPoint) {
  run_world(backend(), 2, [](RankEnv& env) {
    DataChannel& dc = env.dc;
    Tensor t = Tensor::zeros({4});
    Tensor undefined;
    std::vector<uint8_t> bytes(4);
    require_throws<IndexError>([&] { dc.send(t, 5); }, {"send", "5"}, "send to rank 5 of 2");
    require_throws<IndexError>([&] { dc.isend(t, -3); }, {"send", "-3"}, "isend to rank -3");
    require_throws<IndexError>([&] { dc.send(t, kAnySource); }, {"send"}, "send to kAnySource");
    require_throws<IndexError>([&] { dc.recv(t, 2); }, {"recv", "2"}, "recv from rank 2 of 2");
    require_throws<IndexError>([&] { dc.irecv(t, -3); }, {"recv", "-3"}, "irecv from rank -3");
    require_throws<IndexError>([&] { dc.send_bytes(bytes, 9); }, {"9"}, "send_bytes to rank 9 of 2");
    require_throws<IndexError>([&] { dc.recv_bytes(bytes, 9); }, {"9"}, "recv_bytes from rank 9 of 2");
    require_throws<ValueError>([&] { dc.send(t, 1 - env.rank, {.tag = -4}); }, {"tag", "-4"}, "send with tag -4");
    require_throws<ValueError>([&] { dc.irecv(t, 1 - env.rank, {.tag = -4}); }, {"tag", "-4"}, "irecv with tag -4");
    Tensor s = strided(kFloat32);
    require_throws<ValueError>([&] { dc.recv(s, 1 - env.rank); }, {"recv", "contiguous"},
                               "recv into a non-contiguous tensor");
    require_throws<ValueError>([&] { dc.irecv(s, 1 - env.rank); }, {"recv", "contiguous"},
                               "irecv into a non-contiguous tensor");
    require_throws<ValueError>([&] { dc.send(undefined, 1 - env.rank); }, {"send", "undefined"},
                               "send of an undefined tensor");
    require_throws<ValueError>([&] { dc.recv(undefined, 1 - env.rank); }, {"recv", "undefined"},
                               "recv into an undefined tensor");
    // None of these sent anything: the next message is the first one.
    check_send_recv_ring(dc, kInt64, 3, 0, 1);
  });
}

// As torch.distributed: a rank cannot send to or receive from itself, in any form;
// the error names the call and the rank.
TEST_P(InvalidCalls, SendingToOrReceivingFromSelf) {
  run_world(backend(), 2, [](RankEnv& env) {
    DataChannel& dc = env.dc;
    const int me = env.rank;
    const std::string rank = "rank " + std::to_string(me);
    Tensor t = Tensor::zeros({4});
    std::vector<uint8_t> bytes(4);
    require_throws<ValueError>([&] { dc.send(t, me); }, {"send", rank, "own rank"}, "send to self");
    require_throws<ValueError>([&] { dc.isend(t, me); }, {"isend", rank, "own rank"}, "isend to self");
    require_throws<ValueError>([&] { dc.recv(t, me); }, {"recv", rank, "own rank"}, "recv from self");
    require_throws<ValueError>([&] { dc.irecv(t, me); }, {"irecv", rank, "own rank"}, "irecv from self");
    require_throws<ValueError>([&] { dc.send_bytes(bytes, me); }, {"send_bytes", rank}, "send_bytes to self");
    require_throws<ValueError>([&] { dc.irecv_bytes(bytes, me); }, {"irecv_bytes", rank}, "irecv_bytes from self");
    // In a subgroup, by group rank.
    std::shared_ptr<DataChannel> g = dc.new_group({1, 0});
    require_throws<ValueError>([&] { g->isend(t, g->rank()); }, {"isend", "rank " + std::to_string(g->rank())},
                               "isend to self in a subgroup");
    // Nothing was sent: the channel works as before.
    check_send_recv_ring(dc, kInt64, 3, 0, 2);
  });
}

TEST_P(InvalidCalls, Collectives) {
  run_world(backend(), 2, [](RankEnv& env) {
    DataChannel& dc = env.dc;
    const int n = env.size;
    Tensor f = Tensor::zeros({6});
    Tensor i32 = Tensor::zeros({6}, kInt32);
    Tensor undefined;

    // Roots out of range.
    for (int root : {2, -1}) {
      const std::string r = std::to_string(root);
      require_throws<IndexError>([&] { dc.broadcast(f, root); }, {"broadcast", r}, "broadcast root " + r);
      require_throws<IndexError>([&] { dc.ibroadcast(f, root); }, {"broadcast", r}, "ibroadcast root " + r);
      require_throws<IndexError>([&] { dc.reduce(f, root); }, {"reduce", r}, "reduce root " + r);
      Tensor out = Tensor::zeros({6 * n});
      require_throws<IndexError>([&] { dc.gather(out, f, root); }, {"gather", r}, "gather root " + r);
      require_throws<IndexError>([&] { dc.scatter(f, out, root); }, {"scatter", r}, "scatter root " + r);
    }

    // Reduce ops on dtypes they do not apply to.
    require_throws<TypeError>([&] { dc.all_reduce(i32, ReduceOp::Avg); }, {"avg", "int32"}, "all_reduce avg on int32");
    require_throws<TypeError>([&] { dc.reduce(i32, 0, ReduceOp::Avg); }, {"avg", "int32"}, "reduce avg on int32");
    Tensor b = Tensor::zeros({6}, kBool);
    require_throws<TypeError>([&] { dc.all_reduce(b, ReduceOp::Avg); }, {"avg", "bool"}, "all_reduce avg on bool");
    require_throws<TypeError>([&] { dc.all_reduce(f, ReduceOp::BAnd); }, {"band", "float32"},
                              "all_reduce band on float32");
    Tensor h = Tensor::zeros({6}, kFloat16);
    require_throws<TypeError>([&] { dc.iall_reduce(h, ReduceOp::BXor); }, {"bxor", "float16"},
                              "iall_reduce bxor on float16");
    Tensor f_out = Tensor::zeros({3});
    require_throws<TypeError>([&] { dc.reduce_scatter(f_out, f, ReduceOp::BOr); }, {"bor", "float32"},
                              "reduce_scatter bor on float32");

    // Outputs written in place must be contiguous.
    Tensor s = strided(kFloat32);
    Tensor s2 = Tensor::zeros({2 * n, 6}).transpose(0, 1);  // 12 * n elements, not contiguous
    require_throws<ValueError>([&] { dc.all_reduce(s); }, {"all_reduce", "contiguous"}, "all_reduce of a strided tensor");
    require_throws<ValueError>([&] { dc.broadcast(s, 0); }, {"broadcast", "contiguous"}, "broadcast of a strided tensor");
    require_throws<ValueError>([&] { dc.reduce(s, 0); }, {"reduce", "contiguous"}, "reduce of a strided tensor");
    require_throws<ValueError>([&] { dc.all_gather(s2, s.contiguous()); }, {"all_gather", "contiguous"},
                               "all_gather into a strided output");
    require_throws<ValueError>([&] { dc.all_to_all(s, Tensor::zeros({12})); }, {"all_to_all", "contiguous"},
                               "all_to_all into a strided output");

    // Sizes and dtypes that do not fit together.
    Tensor gathered = Tensor::zeros({6 * n + 1});
    require_throws<ValueError>([&] { dc.all_gather(gathered, f); }, {"all_gather", std::to_string(6 * n + 1)},
                               "all_gather into an output of the wrong size");
    Tensor gathered_i = Tensor::zeros({6 * n}, kInt64);
    require_throws<TypeError>([&] { dc.all_gather(gathered_i, f); }, {"all_gather", "int64", "float32"},
                              "all_gather of float32 into int64");
    require_throws<ValueError>([&] { dc.reduce_scatter(f_out, Tensor::zeros({3 * n + 2})); },
                               {"reduce_scatter", std::to_string(3 * n + 2)},
                               "reduce_scatter of an input that is not size() x the output");
    require_throws<TypeError>([&] { dc.reduce_scatter(f_out, Tensor::zeros({3 * n}, kFloat64)); },
                              {"reduce_scatter", "float64", "float32"}, "reduce_scatter of float64 into float32");
    Tensor seven = Tensor::zeros({7});
    require_throws<ValueError>([&] { dc.all_to_all(seven, Tensor::zeros({7})); }, {"all_to_all", "7"},
                               "all_to_all of 7 elements over 2 ranks");
    Tensor a2a_out = Tensor::zeros({8});
    require_throws<ValueError>([&] { dc.all_to_all(a2a_out, Tensor::zeros({6})); }, {"all_to_all", "8", "6"},
                               "all_to_all with output and input of different sizes");
    Tensor a2a_i = Tensor::zeros({6}, kInt32);
    require_throws<TypeError>([&] { dc.all_to_all(a2a_i, f); }, {"all_to_all", "int32", "float32"},
                              "all_to_all of float32 into int32");
    require_throws<ValueError>([&] { dc.all_reduce(undefined); }, {"all_reduce", "undefined"},
                               "all_reduce of an undefined tensor");
    require_throws<ValueError>([&] { dc.broadcast(undefined, 0); }, {"broadcast", "undefined"},
                               "broadcast of an undefined tensor");

    // Collective tags are 0 .. 2^31-1.
    require_throws<ValueError>([&] { dc.all_reduce(f, ReduceOp::Sum, {.tag = -1}); }, {"tag", "-1"},
                               "all_reduce with tag -1");
    require_throws<ValueError>([&] { dc.barrier({.tag = int64_t{1} << 31}); }, {"tag", "2147483648"},
                               "barrier with tag 2^31");

    // None of these started a collective: the sequence is where it was.
    check_all_reduce(dc, kFloat32, 5, ReduceOp::Sum, 2);
    check_broadcast(dc, kInt64, 5, 1, 3);
  });
}

// Checks only the root makes (the output of gather, the input of scatter) fail on
// the root; the other ranks have nothing to check and start the collective, so
// each case gets a tag of its own, which the root never completes.
TEST_P(InvalidCalls, RootOnlyChecks) {
  run_world(backend(), 2, [](RankEnv& env) {
    DataChannel& dc = env.dc;
    const CollectiveOptions gather_tag{.tag = 1, .timeout = milliseconds(300)};
    const CollectiveOptions scatter_tag{.tag = 2, .timeout = milliseconds(300)};
    Tensor in = Tensor::zeros({5});
    if (env.rank == 0) {
      Tensor out = Tensor::zeros({11});
      require_throws<ValueError>([&] { dc.gather(out, in, 0, gather_tag); }, {"gather", "11"},
                                 "gather into a root output of the wrong size");
      Tensor undefined;
      require_throws<ValueError>([&] { dc.gather(undefined, in, 0, gather_tag); }, {"gather"},
                                 "gather into an undefined root output");
      require_throws<ValueError>([&] { dc.scatter(in, Tensor::zeros({9}), 0, scatter_tag); }, {"scatter", "9"},
                                 "scatter of a root input of the wrong size");
      require_throws<ValueError>([&] { dc.scatter(in, Tensor(), 0, scatter_tag); }, {"scatter"},
                                 "scatter of an undefined root input");
    } else {
      // Whatever becomes of these (done, or timed out), they must end.
      Tensor none;
      Request g = dc.igather(none, in, 0, gather_tag);
      Request s = dc.iscatter(in, Tensor(), 0, scatter_tag);
      try {
        wait_all(std::vector<Request>{g, s});
      } catch (const Error&) {
      }
    }
    check_all_reduce(dc, kFloat32, 5, ReduceOp::Sum, 4);
  });
}

THD_CONFORMANCE_BACKENDS(InvalidCalls);

}  // namespace
}  // namespace thd::conformance
