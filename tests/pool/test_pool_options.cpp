// The command lines of the pool: thd-worker's, and thdrun's --pool and --listen.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_throw.h"
#include "protocol/pool_store.h"
#include "tools/thd_worker/options.h"
#include "tools/thdrun/options.h"

namespace thd::test {
namespace {

worker_cli::ParsedArgs parse_worker(std::vector<std::string> args) { return worker_cli::parse_args(args); }
launch::ParsedArgs parse_thdrun(std::vector<std::string> args) { return launch::parse_args(args); }

TEST(ThdWorkerOptions, ParsesAWorkerOfAPool) {
  const auto p = parse_worker({"--pool", "tcp://[::1]:29500", "--node=2", "--nodes", "3", "--bind-host", "0.0.0.0",
                               "--host-store", "--connect-timeout", "1.5"});
  EXPECT_EQ(p.action, worker_cli::Action::Serve);
  EXPECT_EQ(p.pool.pool_url, "tcp://[::1]:29500");
  EXPECT_EQ(p.pool.node, 2);
  EXPECT_EQ(p.pool.num_nodes, 3);
  EXPECT_EQ(p.pool.bind_host, "0.0.0.0");
  EXPECT_TRUE(p.pool.host_store);
  EXPECT_EQ(p.pool.connect_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(parse_worker({"--help", "--bogus"}).action, worker_cli::Action::Help);
}

TEST(ThdWorkerOptions, RefusesWhatCannotWork) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--node", "0", "--nodes", "1"}, "missing --pool"},
      {{"--pool", "tcp://h:1", "--nodes", "1"}, "missing --node"},
      {{"--pool", "tcp://h:1", "--node", "0"}, "missing --nodes"},
      {{"--pool", "tcp://h:1", "--node", "2", "--nodes", "2"}, "--node 2 is not in 0..1"},
      {{"--pool", "http://h:1", "--node", "0", "--nodes", "1"}, "tcp://host:port"},
      {{"--pool", "tcp://h", "--node", "0", "--nodes", "1"}, "has no port"},
      {{"--pool", "tcp://h:70000", "--node", "0", "--nodes", "1"}, "not a number in 1..65535"},
      {{"--pool", "tcp://h:1", "--node", "0", "--nodes", "0"}, "--nodes expects a number from 1"},
      {{"--pool", "tcp://h:1", "--node", "0", "--node", "1", "--nodes", "2"}, "given twice"},
      // The secret never goes on a command line.
      {{"--token", "s3cret"}, "unknown option '--token'"},
      {{"stray"}, "unexpected argument 'stray'"},
  };
  for (const auto& [args, needle] : bad) {
    THD_EXPECT_THROW_MSG(parse_worker(args), ValueError, needle);
  }
}

TEST(ThdrunPoolOptions, ParsesAPoolWithOrWithoutAProgram) {
  const auto serve = parse_thdrun({"--pool", "-n", "4", "--listen", "0.0.0.0:29500"});
  EXPECT_TRUE(serve.options.pool);
  EXPECT_EQ(serve.options.nproc, 4);
  EXPECT_EQ(serve.options.listen_host, "0.0.0.0");
  EXPECT_EQ(serve.options.listen_port, 29500);
  EXPECT_TRUE(serve.options.command.empty());

  const auto with_program = parse_thdrun({"--pool", "-n2", "--listen=[::1]:0", "./master", "--flag"});
  EXPECT_EQ(with_program.options.listen_host, "::1");
  EXPECT_EQ(with_program.options.listen_port, 0);
  EXPECT_EQ(with_program.options.command, (std::vector<std::string>{"./master", "--flag"}));

  const auto defaults = parse_thdrun({"--pool", "-n", "1"});
  EXPECT_EQ(defaults.options.listen_host, "127.0.0.1");
  EXPECT_EQ(defaults.options.listen_port, 0);
}

TEST(ThdrunPoolOptions, RefusesMixedUpOptions) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--pool"}, "missing -n N"},
      {{"-n", "2", "--listen", "h:1", "prog"}, "--listen is for --pool only"},
      {{"--pool", "-n", "2", "--master-port", "5"}, "--listen HOST:PORT"},
      {{"--pool", "-n", "2", "--listen", "h"}, "expects HOST:PORT"},
      {{"--pool", "-n", "2", "--listen", ":5"}, "no host"},
      {{"--pool", "-n", "2", "--listen", "h:x"}, "from 0 (a free one) to 65535"},
      {{"--pool", "-n", "2", "--listen", "::1:5"}, "IPv6 in brackets"},
  };
  for (const auto& [args, needle] : bad) {
    THD_EXPECT_THROW_MSG(parse_thdrun(args), ValueError, needle);
  }
}

TEST(PoolStore, SessionConfigRoundTripsAndRejectsGarbage) {
  const pool::SessionConfig c{.backend = "tcp", .timeout = std::chrono::milliseconds(1234)};
  const pool::SessionConfig back = pool::decode_config(pool::encode_config(c), "test");
  EXPECT_EQ(back.backend, "tcp");
  EXPECT_EQ(back.timeout, c.timeout);
  // A newer master's extra lines are ignored.
  EXPECT_EQ(pool::decode_config("future=1\nbackend=mpi\ntimeout_ms=5\n", "test").backend, "mpi");
  THD_EXPECT_THROW_MSG(pool::decode_config("backend=tcp\n", "test"), ValueError, "lacks timeout_ms");
  THD_EXPECT_THROW_MSG(pool::decode_config("backend=../x\ntimeout_ms=1", "test"), ValueError, "backend");
  THD_EXPECT_THROW_MSG(pool::decode_config("backend=tcp\ntimeout_ms=-1", "test"), ValueError, "timeout_ms");
  THD_EXPECT_THROW_MSG(pool::decode_config("nonsense", "test"), ValueError, "malformed");
  THD_EXPECT_THROW_MSG(pool::parse_active("12x", "test"), ValueError, "not a session id");
  EXPECT_FALSE(pool::parse_active("", "test").has_value());
  EXPECT_EQ(pool::parse_active("42", "test").value(), 42u);
  EXPECT_EQ(pool::pool_url("::1", 5), "tcp://[::1]:5");
}

}  // namespace
}  // namespace thd::test
