// Linking thd leaves the termination signals alone: the libraries its backends
// link (libfabric's PSM driver, UCX's libucs) catch some at load time, and thd puts
// them back (datachannel/library_signal_handlers.cpp).
#include <gtest/gtest.h>

#include <csignal>

#include <thd/datachannel.h>

namespace thd {
namespace {

TEST(SignalDefaults, TerminationSignalsKeepTheirDefaultActionInAProgramThatLinksThd) {
  // Referencing the library makes sure it is loaded (its constructors have run).
  ASSERT_FALSE(DataChannel::available_backends().empty());
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM}) {
    struct sigaction current {};
    ASSERT_EQ(::sigaction(sig, nullptr, &current), 0);
    EXPECT_TRUE(current.sa_handler == SIG_DFL && (current.sa_flags & SA_SIGINFO) == 0)
        << "signal " << sig << " has a handler installed by a library thd links";
  }
}

}  // namespace
}  // namespace thd
