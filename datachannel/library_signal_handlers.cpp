// Libraries some backends link install signal handlers from their load-time
// constructors. Those backends are modules the registry loads only for a program
// that asks for them (backend_modules.cpp), and right after loading one it undoes:
// - Debian's libfabric loads the PSM driver (libinfinipath), which catches SIGINT,
//   SIGTERM, SIGILL, SIGABRT, SIGBUS and SIGSEGV: a thd program stopped with
//   SIGTERM would exit with status 1 instead of dying of the signal (which
//   launchers - thdrun, mpirun, Slurm - read), and a crash would lose its core dump;
// - UCX's libucs takes SIGHUP for its debug dump (UCX_DEBUG_SIGNO), so a hang-up
//   that thdrun forwards would not end a rank.
// so even a program that uses ucx or libfabric keeps the default actions. (A
// static build links those libraries into every program: there the generated
// backend_catalog.cpp undoes the handlers when the program starts.) UCX's crash
// handlers (UCX_HANDLE_ERRORS) stay: they print a backtrace and then let the
// signal do what it would have done. A program's own
// handlers are left alone: only handlers inside those libraries are undone.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

#include "datachannel/library_signal_handlers.h"

namespace thd::detail {
namespace {

// The file of the library a handler lives in, "" for none.
const char* owner_of(const struct sigaction& action) {
  if (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN) return "";
  void* handler = (action.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<void*>(action.sa_sigaction)
                                                      : reinterpret_cast<void*>(action.sa_handler);
  Dl_info info{};
  if (::dladdr(handler, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

bool restores(int sig, const char* owner) {
  if (std::strstr(owner, "libinfinipath") != nullptr || std::strstr(owner, "libpsm") != nullptr) return true;
  return sig == SIGHUP && std::strstr(owner, "libucs") != nullptr;
}

}  // namespace

void restore_library_signal_handlers() {
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && restores(sig, owner_of(current))) std::signal(sig, SIG_DFL);
  }
}

}  // namespace thd::detail
