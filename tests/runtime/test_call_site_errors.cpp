// Bad calls throw at the line that made them, before anything reaches a worker:
// shape and dtype errors (the same thd::Error subclass as the local library, naming
// the node), tensors of different nodes in one op (naming both nodes and the fix,
// to_node), nodes out of range, undefined handles, and CUDA without CUDA support.
// None of them disturbs the session.
#include <gtest/gtest.h>

#include <functional>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class CallSiteErrors : public JobTest<2> {};

// What a call threw, for further checks.
struct Caught {
  ErrorContext context;
  std::string what;
};

// `call` throws a thd::Error of type E right away, whose what() contains every needle.
template <typename E>
Caught expect_throws_now(const std::function<void()>& call, const std::vector<std::string>& needles,
                               const std::string& what) {
  SCOPED_TRACE(what);
  try {
    call();
    ADD_FAILURE() << what << ": did not throw";
  } catch (const E& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << what << ": '" << e.what() << "' does not mention '" << needle << "'";
    }
    return {e.context(), e.what()};
  } catch (...) {
    ADD_FAILURE() << what << ": threw " << error_type(std::current_exception()) << " ("
                  << error_text(std::current_exception()) << "), expected " << typeid(E).name();
  }
  return {};
}

TEST_F(CallSiteErrors, ShapeAndDtypeErrorsNameTheOpAndNode) {
  for (int node : {0, 1}) {
    SCOPED_TRACE("node " + std::to_string(node));
    DistributedTensor a = sample_tensor({2, 3}, kFloat32, 1).dist_send(node);
    DistributedTensor b = sample_tensor({4}, kFloat32, 2).dist_send(node);
    DistributedTensor i = Tensor::arange(2).dist_send(node);
    DistributedTensor i3 = Tensor::arange(3).dist_send(node);
    DistributedTensor f = Tensor::zeros({2}).dist_send(node);
    Caught c = expect_throws_now<ShapeError>([&] { (void)(a + b); }, {"[2, 3]", "[4]"}, "a + b");
    EXPECT_EQ(c.context.node, node) << "a call-site error names the node of its operands: " << c.what;
    EXPECT_FALSE(c.context.op.empty());
    c = expect_throws_now<ShapeError>([&] { a.mm(a); }, {"mm"}, "mm");
    EXPECT_EQ(c.context.node, node) << c.what;
    EXPECT_TRUE(c.what.find("[2, 3]") != std::string::npos || c.what.find("2x3") != std::string::npos)
        << "the message does not name the shapes: " << c.what;
    expect_throws_now<ShapeError>([&] { a.view({5}); }, {}, "view");
    expect_throws_now<IndexError>([&] { a.sum({3}); }, {}, "sum over dim 3");
    c = expect_throws_now<TypeError>([&] { a.index_select(0, f); }, {"float32"}, "index_select with float index");
    EXPECT_EQ(c.context.node, node) << c.what;
    expect_throws_now<TypeError>([&] { i.mean(); }, {}, "mean of int64");
    expect_throws_now<TypeError>([&] { i.add_(f); }, {}, "int64 add_ float32");
    expect_throws_now<TypeError>([&] { where(i3, a, a); }, {"bool"}, "where with an int64 condition");
    // None of these reached a worker or changed an operand.
    EXPECT_TRUE(same_tensor(a.get(), sample_tensor({2, 3}, kFloat32, 1)));
    EXPECT_TRUE(same_tensor(i.get(), Tensor::arange(2)));
  }
  synchronize();  // nothing pending, nothing failed
}

TEST_F(CallSiteErrors, MixingNodesNamesBothNodesAndTheFix) {
  DistributedTensor a = Tensor::ones({3}).dist_send(0);
  DistributedTensor b = Tensor::ones({3}).dist_send(1);
  DistributedTensor m0 = Tensor::ones({3, 3}).dist_send(0);
  DistributedTensor m1 = Tensor::ones({3, 3}).dist_send(1);
  DistributedTensor i1 = Tensor::arange(2).dist_send(1);
  DistributedTensor c0 = Tensor::ones({3}, kBool).dist_send(0);
  const std::vector<std::string> both = {"node 0", "node 1", "to_node"};
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"a + b", [&] { (void)(a + b); }},
      {"b - a", [&] { (void)(b - a); }},
      {"a.add_(b)", [&] { a.add_(b); }},
      {"a *= b", [&] { a *= b; }},
      {"a.maximum(b)", [&] { a.maximum(b); }},
      {"a.eq(b)", [&] { a.eq(b); }},
      {"a.copy_(b)", [&] { a.copy_(b); }},
      {"m0.matmul(m1)", [&] { m0.matmul(m1); }},
      {"m0.addmm(m0, m1)", [&] { m0.addmm(m0, m1); }},
      {"a.index_select(0, i1)", [&] { a.index_select(0, i1); }},
      {"a.masked_fill(mask on node 1)", [&] { b.masked_fill(c0, 1); }},
      {"cat", [&] { cat({a, b}); }},
      {"stack", [&] { stack({a, a, b}); }},
      {"where", [&] { where(c0, a, b); }},
  };
  for (const auto& [what, call] : calls) expect_throws_now<Error>(call, both, what);
  // The operands are untouched and the session carries on.
  EXPECT_TRUE(same_tensor(a.get(), Tensor::ones({3})));
  EXPECT_TRUE(same_tensor((a + b.to_node(0)).get(), Tensor::full({3}, 2)));
}

TEST_F(CallSiteErrors, NodesOutOfRange) {
  const Tensor local = Tensor::ones({2});
  DistributedTensor a = local.dist_send(0);
  for (int bad : {2, 7, -1}) {
    const std::string n = std::to_string(bad);
    SCOPED_TRACE("node " + n);
    expect_throws_now<Error>([&] { local.dist_send(bad); }, {n}, "dist_send");
    expect_throws_now<Error>([&] { DistributedTensor::from(local, bad); }, {n}, "from");
    expect_throws_now<Error>([&] { a.to_node(bad); }, {n}, "to_node");
    expect_throws_now<Error>(
        [&] {
          NodeScope on(bad);
          DistributedTensor::zeros({2});
        },
        {n}, "NodeScope + zeros");
  }
  EXPECT_EQ(current_node(), 0) << "a failed NodeScope must not leave the thread on another node";
  EXPECT_TRUE(same_tensor(DistributedTensor::ones({2}).get(), local));
  // A node the call names is the call's error, not a scope's.
  const Caught negative = expect_throws_now<IndexError>([&] { local.dist_send(-3); }, {"-3", "out of range", "0..1"},
                                                        "dist_send(-3)");
  EXPECT_EQ(negative.context.op, "dist_send") << negative.what;
}

TEST_F(CallSiteErrors, TensorsTooLargeForAnyNodeSaySo) {
  // Their bytes do not fit in int64: said as such, not as a view out of its storage.
  expect_throws_now<ValueError>([] { DistributedTensor::arange(0, int64_t{1} << 62); },
                                {"arange", "too large", "2^63"}, "arange(0, 2^62)");
  expect_throws_now<ValueError>([] { DistributedTensor::eye(int64_t{1} << 31); }, {"eye", "too large"},
                                "eye(2^31)");
  expect_throws_now<ValueError>([] { DistributedTensor::zeros({int64_t{1} << 40, int64_t{1} << 30}); },
                                {"zeros", "too large"}, "zeros of 2^70 elements");
  EXPECT_TRUE(same_tensor(DistributedTensor::arange(4).get(), Tensor::arange(4)));
}

TEST_F(CallSiteErrors, UndefinedHandles) {
  DistributedTensor u;
  DistributedTensor a = DistributedTensor::ones({2});
  EXPECT_FALSE(u.defined());
  EXPECT_TRUE(a.defined());
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"get", [&] { u.get(); }},
      {"item", [&] { u.item<float>(); }},
      {"node", [&] { u.node(); }},
      {"shape", [&] { u.shape(); }},
      {"add", [&] { u.add(1); }},
      {"a.add(u)", [&] { a.add(u); }},
      {"u + a", [&] { (void)(u + a); }},
      {"a.add_(u)", [&] { a.add_(u); }},
      {"fill_", [&] { u.fill_(1); }},
      {"view", [&] { u.view({2}); }},
      {"sum", [&] { u.sum(); }},
      {"to_node", [&] { u.to_node(1); }},
      {"cat", [&] { cat({a, u}); }},
      {"where", [&] { where(u, a, a); }},
      {"copy_ from undefined", [&] { a.copy_(u); }},
      {"all_reduce", [&] {
         std::vector<DistributedTensor> v = {u, a.to_node(1)};
         all_reduce(v);
       }},
  };
  for (const auto& [what, call] : calls) expect_throws_now<Error>(call, {}, what);
  EXPECT_TRUE(same_tensor(a.get(), Tensor::ones({2})));
}

}  // namespace
}  // namespace thd::test
