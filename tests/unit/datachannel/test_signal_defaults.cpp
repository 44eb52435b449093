// Linking thd leaves the termination signals alone: the libraries that catch some
// at load time (libfabric's PSM driver, UCX's libucs) belong to backends whose
// modules load only when a channel asks for them, and then thd puts the handlers
// back (datachannel/library_signal_handlers.cpp); a static build puts them back as
// the program starts.
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
