#include "datachannel/mpi/mpi_library.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "datachannel/check.h"

namespace thd::detail::mpi {

namespace {

std::once_flag g_finalize_once;

std::mutex& hooks_mu() {
  static std::mutex mu;
  return mu;
}
std::map<const void*, std::function<void()>>& hooks() {
  static auto* table = new std::map<const void*, std::function<void()>>();  // outlives static destructors
  return *table;
}

void finalize_at_exit() {
  std::map<const void*, std::function<void()>> quiesce;
  {
    std::lock_guard lock(hooks_mu());
    quiesce.swap(hooks());
  }
  for (auto& [key, hook] : quiesce) hook();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string_view level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

}  // namespace

void register_before_finalize(const void* key, std::function<void()> quiesce) {
  std::lock_guard lock(hooks_mu());
  hooks()[key] = std::move(quiesce);
}

void unregister_before_finalize(const void* key) {
  std::lock_guard lock(hooks_mu());
  hooks().erase(key);
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

void check(int code, std::string_view op, std::string_view call) {
  if (code == MPI_SUCCESS) return;
  THD_THROW(ConnectionError, std::string(op), "{} failed: {}", call, error_text(code));
}

void ensure_initialized(std::string_view op) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  THD_CHECK(!finalized, ConnectionError, std::string(op), "MPI was finalized already; it cannot be used again");
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), op, "MPI_Init_thread");
    std::call_once(g_finalize_once, [] { std::atexit(finalize_at_exit); });
  }
  THD_CHECK(provided >= MPI_THREAD_MULTIPLE, ConnectionError, std::string(op),
            "the MPI library provides {}, but thd's mpi backend needs MPI_THREAD_MULTIPLE (its progress thread "
            "and the program's threads call MPI concurrently){}",
            level_name(provided),
            initialized ? "; the program initialized MPI itself: call MPI_Init_thread with MPI_THREAD_MULTIPLE"
                        : "; use an MPI built with thread support (Open MPI and MPICH from Debian are)");
}

bool launched_by_mpi(const net::EnvLookup& env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (auto v = env(name); v && !v->empty()) return true;
  }
  return false;
}

}  // namespace thd::detail::mpi
