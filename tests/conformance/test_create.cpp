// DataChannel::create: backend names, options, and what a new channel reports.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends.h"
#include "checks.h"
#include "datachannel/test_util.h"
#include "expect_throw.h"
#include "rank_threads.h"

namespace thd::conformance {
namespace {

DataChannelOptions options_for(int rank, int world_size) {
  DataChannelOptions o;
  o.store = std::make_shared<HashStore>(std::chrono::milliseconds(2000));
  o.rank = rank;
  o.world_size = world_size;
  o.timeout = std::chrono::milliseconds(2000);
  o.token = std::string(test::kToken);
  return o;
}

TEST(Backends, AvailableBackendsAreSortedAndKnownToTheSuite) {
  const auto built = DataChannel::available_backends();
  EXPECT_FALSE(built.empty());
  EXPECT_TRUE(std::is_sorted(built.begin(), built.end()));
  for (const auto& name : built) {
    EXPECT_NE(std::find(known_backends().begin(), known_backends().end(), name), known_backends().end())
        << "backend '" << name << "' is available but the suite's list (the registry's) lacks it";
  }
}

TEST(Backends, UnknownBackendIsAValueErrorListingTheAvailableOnes) {
  std::string message;
  THD_EXPECT_THROW_MSG(DataChannel::create("no-such-backend", options_for(0, 1)), ValueError, "no-such-backend");
  try {
    DataChannel::create("no-such-backend", options_for(0, 1));
  } catch (const ValueError& e) {
    message = e.what();
  }
  for (const auto& name : DataChannel::available_backends()) {
    EXPECT_NE(message.find(name), std::string::npos) << "'" << message << "' does not list backend " << name;
  }
}

TEST(Backends, KnownBackendNotBuiltIsAValueErrorSayingSo) {
  for (const auto& name : known_backends()) {
    if (is_built(name)) continue;
    THD_EXPECT_THROW_MSG(DataChannel::create(name, options_for(0, 1)), ValueError, name);
    try {
      DataChannel::create(name, options_for(0, 1));
    } catch (const ValueError& e) {
      for (const auto& built : DataChannel::available_backends()) {
        EXPECT_NE(std::string(e.what()).find(built), std::string::npos)
            << "'" << e.what() << "' does not list backend " << built;
      }
    }
  }
}

class Create : public BackendTest {};

TEST_P(Create, RejectsBadOptions) {
  DataChannelOptions no_store = options_for(0, 1);
  no_store.store = nullptr;
  THD_EXPECT_THROW_MSG(DataChannel::create(backend(), no_store), ValueError, "store");
  THD_EXPECT_THROW_MSG(DataChannel::create(backend(), options_for(2, 2)), ValueError, "rank");
  THD_EXPECT_THROW_MSG(DataChannel::create(backend(), options_for(-1, 2)), ValueError, "rank");
  THD_EXPECT_THROW_MSG(DataChannel::create(backend(), options_for(0, 0)), ValueError, "world_size");
}

TEST_P(Create, ChannelReportsItsWorld) {
  const std::chrono::milliseconds timeout(12345);
  run_world(
      backend(), 3,
      [&](RankEnv& env) {
        const std::string who = "rank " + std::to_string(env.rank);
        require(env.dc.rank() == env.rank, who + ": rank() is " + std::to_string(env.dc.rank()));
        require(env.dc.size() == 3, who + ": size() is " + std::to_string(env.dc.size()));
        require(env.dc.is_member(), who + ": is_member() is false for the world");
        require(env.dc.backend() == backend(), who + ": backend() is '" + env.dc.backend() + "'");
        require(env.dc.world_ranks() == std::vector<int>({0, 1, 2}), who + ": world_ranks() is not {0, 1, 2}");
        require(env.dc.timeout() == timeout,
                who + ": timeout() is " + std::to_string(env.dc.timeout().count()) + " ms");
        std::shared_ptr<DataChannel> g = env.dc.new_group({2, 0}, std::chrono::milliseconds(777));
        if (g->is_member()) {
          require(g->timeout() == std::chrono::milliseconds(777),
                  who + ": a group made with a 777 ms timeout reports " + std::to_string(g->timeout().count()));
        }
        std::shared_ptr<DataChannel> h = env.dc.new_group({0, 1});
        if (h->is_member()) {
          require(h->timeout() == timeout, who + ": a group made without a timeout does not inherit the world's");
        }
      },
      {.timeout = timeout});
}

THD_CONFORMANCE_BACKENDS(Create);

}  // namespace
}  // namespace thd::conformance
