// Run under mpirun (tests/launch/CMakeLists.txt): every rank runs this program.
//
//   spmd_sessions session [--backend NAME]
//     init_master_worker, a little work, shutdown; then init_master_worker again
//     with a 3 s timeout: the workers (ranks > 0) exited at shutdown, so it must
//     fail at once with an error that says so.
//   spmd_sessions rendezvous
//     every rank joins an mpi:// rendezvous; then rank 0 alone starts another with
//     a 3 s timeout, which no other rank joins: it must fail with a TimeoutError
//     naming the rendezvous and its timeout within about that time.
//   spmd_sessions channel
//     every rank joins an mpi:// rendezvous; then rank 0 alone creates an mpi
//     DataChannel with a 3 s timeout, whose set-up no other rank joins: it must
//     fail with a TimeoutError naming the MPI call and its timeout, in about that.
//
// Exits 0 when rank 0 saw what it should, 1 (with the reason on stderr) otherwise.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <thd/thd.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTimeout{3000};

int fail(const std::string& why) {
  std::fprintf(stderr, "spmd_sessions: FAIL: %s\n", why.c_str());
  return 1;
}

bool mentions(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int second_session(const std::string& backend) {
  thd::init_master_worker({.backend = backend, .timeout = kTimeout});  // ranks > 0 serve here and exit
  const float sum = thd::DistributedFloatTensor({4}).fill_(2).sum().get().item<float>();
  if (sum != 8) return fail("the first session computed " + std::to_string(sum) + ", not 8");
  thd::shutdown();

  const auto start = Clock::now();
  try {
    thd::init_master_worker({.backend = backend, .timeout = kTimeout});
  } catch (const thd::Error& e) {
    const double took = seconds_since(start);
    if (took > 1.0) return fail("the second init_master_worker took " + std::to_string(took) + " s to fail");
    if (!mentions(e.what(), "exited at shutdown")) return fail(std::string("unclear error: ") + e.what());
    std::printf("spmd_sessions: the second session failed after %.3f s: %s\n", took, e.what());
    return 0;
  }
  return fail("the second init_master_worker succeeded");
}

int lone_rendezvous() {
  thd::RendezvousOptions o;
  o.init_method = "mpi://";
  o.timeout = kTimeout;
  const thd::RendezvousResult first = thd::rendezvous(o);
  if (first.rank != 0) return 0;  // the others leave: MPI_Finalize at exit
  const auto start = Clock::now();
  try {
    (void)thd::rendezvous(o);
  } catch (const thd::TimeoutError& e) {
    const double took = seconds_since(start);
    if (took < 2.9 || took > 6.0) return fail("the lone rendezvous timed out after " + std::to_string(took) + " s");
    if (!mentions(e.what(), "rendezvous (mpi://)") || !mentions(e.what(), "3000 ms")) {
      return fail(std::string("the timeout does not name the rendezvous and its timeout: ") + e.what());
    }
    std::printf("spmd_sessions: the lone rendezvous failed after %.3f s: %s\n", took, e.what());
    return 0;
  } catch (const std::exception& e) {
    return fail(std::string("the lone rendezvous failed with something other than a TimeoutError: ") + e.what());
  }
  return fail("the lone rendezvous succeeded");
}

int lone_channel() {
  thd::RendezvousOptions o;
  o.init_method = "mpi://";
  o.timeout = kTimeout;
  const thd::RendezvousResult joined = thd::rendezvous(o);
  if (joined.rank != 0) return 0;  // the others leave: MPI_Finalize at exit
  const auto start = Clock::now();
  try {
    (void)thd::DataChannel::create(
        "mpi", {.store = joined.store, .rank = joined.rank, .world_size = joined.world_size, .timeout = kTimeout});
  } catch (const thd::TimeoutError& e) {
    const double took = seconds_since(start);
    if (took < 2.9 || took > 6.0) return fail("the lone channel set-up timed out after " + std::to_string(took) + " s");
    if (!mentions(e.what(), "MPI_Comm_idup") || !mentions(e.what(), "3000 ms")) {
      return fail(std::string("the timeout does not name the MPI call and its timeout: ") + e.what());
    }
    std::printf("spmd_sessions: the lone channel set-up failed after %.3f s: %s\n", took, e.what());
    return 0;
  } catch (const std::exception& e) {
    return fail(std::string("the lone channel set-up failed with something other than a TimeoutError: ") + e.what());
  }
  return fail("the lone channel set-up succeeded");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "session") return second_session(thd::backend_from_args(argc, argv));
    if (mode == "rendezvous") return lone_rendezvous();
    if (mode == "channel") return lone_channel();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return fail("usage: spmd_sessions session [--backend NAME] | rendezvous | channel");
}
