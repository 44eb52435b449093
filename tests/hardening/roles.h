// The other programs of the hardening tests are this same binary, run with a role
// flag: a worker of a job the test process masters, or a master of its own (a
// separate process the test can kill, or let exit without thd::shutdown()).
//
//   --hardening-worker               joins the job the environment describes
//                                    (env://) as a worker; exits as an SPMD
//                                    worker does (0 after Goodbye, 1 when the
//                                    master is lost), 2 when init threw
//   --hardening-master SCENARIO [URL] a master; SCENARIO is one of kScenarios,
//                                    URL a worker pool's address (else env://)
//   --hardening-listener KIND        a listener under a flood (listener_role.cpp):
//                                    KIND store or mesh
//
// THD_HARDENING_TIMEOUT_MS sets the role's MasterWorkerOptions::timeout (the
// test's choice, not a thd variable). Masters print what they reached on stdout,
// one line each, at once: "master ready", "master inside: ...".
#pragma once

#include <optional>

namespace thd::test {

inline constexpr const char* kWorkerRole = "--hardening-worker";
inline constexpr const char* kMasterRole = "--hardening-master";
inline constexpr const char* kListenerRole = "--hardening-listener";

// With THD_HARDENING_NOFILE=N the process's soft descriptor limit is N (at
// most the hard limit): a listener that runs short of descriptors. Then:
//   store  a TCPStore server on 127.0.0.1 (THD_AUTH_TOKEN); prints
//          "listening port=P" and serves until killed (at most a minute)
//   mesh   ranks 0..2 of a tcp DataChannel over an in-process store; prints rank
//          0's mesh listener as "listening port=P", then waits for the
//          THD_HARDENING_RELEASE file before it starts ranks 1 and 2, and prints
//          "mesh complete in MS ms" (0) or "mesh failed: ..." (1)
int run_listener_role(const char* kind);

// Master scenarios:
//   return    work queued on every node, then main returns without shutdown()
//   exit      the same, then std::exit(0) from inside a call
//   throw     the same, then an exception nobody catches (std::terminate)
//   busy      seconds of work queued on a side stream of every node; once every
//             node is provably running it, "master inside: ..." and a wait to be
//             killed (at most a minute)
//   busy-default  seconds of work queued on the default stream of every node,
//             then "master queued" and a wait to be killed (the default stream
//             answers no statistics while it works: the test watches the workers'
//             CPU time instead)
//   audit     "master ready" with THD_AUTH_TOKEN_FILE and MASTER_PORT, then waits
//             (at most 20 s) for the file named by THD_HARDENING_RELEASE to appear,
//             and shuts down
//   lose-worker  under thdrun -n 4: values on every node, then the master creates
//             the THD_HARDENING_RELEASE file and node 1 (rank 2), which waits for
//             it, SIGKILLs itself; the master waits for thd::WorkerLost on node 1,
//             then computes and checks values on nodes 0 and 2 (one copied
//             between them), prints "master finished without node 1" and
//             shuts down; 0 when all went as said
// and one that is not master-worker:
//   mesh      every rank (env://) joins a tcp DataChannel with the default options;
//             rank 2 only once the THD_HARDENING_RELEASE file appears, so the ranks
//             below it wait with their mesh listeners open; then a barrier
inline constexpr const char* kScenarios[] = {"return", "exit",  "throw",       "busy",
                                             "busy-default", "audit", "lose-worker", "mesh"};

// Called first thing in main(): runs the role argv asks for and returns main's
// exit status (a worker never returns). nullopt when argv asks for no role.
std::optional<int> run_role_if_asked(int argc, char** argv);

}  // namespace thd::test
