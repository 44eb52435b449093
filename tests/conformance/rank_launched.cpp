#include "rank_launched.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "checks.h"
#include "datachannel/test_util.h"

namespace thd::conformance {

namespace {

int env_int(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

// One store for the whole process: the launch's ranks meet once.
std::shared_ptr<Store> launch_store() {
  static std::shared_ptr<Store> store = [] {
    RendezvousOptions o;
    o.init_method = "mpi://";
    o.timeout = std::chrono::seconds(60);
    o.token = std::string(test::kToken);
    return rendezvous(o).store;
  }();
  return store;
}

// An error as "<class>\n<what>", and back: the thd class survives the trip, so a
// rank's checks on another rank's error read the same as with rank threads.
std::string encode_error(const std::exception_ptr& e) {
  if (!e) return "none\n";
  try {
    std::rethrow_exception(e);
  } catch (const WorkerLost& x) {
    return std::string("WorkerLost\n") + x.what();
  } catch (const PeerLost& x) {
    return std::string("PeerLost\n") + x.what();
  } catch (const ConnectionError& x) {
    return std::string("ConnectionError\n") + x.what();
  } catch (const AuthError& x) {
    return std::string("AuthError\n") + x.what();
  } catch (const TimeoutError& x) {
    return std::string("TimeoutError\n") + x.what();
  } catch (const ShapeError& x) {
    return std::string("ShapeError\n") + x.what();
  } catch (const ValueError& x) {
    return std::string("ValueError\n") + x.what();
  } catch (const TypeError& x) {
    return std::string("TypeError\n") + x.what();
  } catch (const IndexError& x) {
    return std::string("IndexError\n") + x.what();
  } catch (const Error& x) {
    return std::string("Error\n") + x.what();
  } catch (const ConformanceFailure& x) {
    return std::string("ConformanceFailure\n") + x.what();
  } catch (const std::exception& x) {
    return std::string("exception\n") + x.what();
  } catch (...) {
    return "exception\na non-standard exception";
  }
}

std::exception_ptr decode_error(const std::string& text, int rank) {
  const size_t nl = text.find('\n');
  const std::string kind = text.substr(0, nl);
  const std::string what = "(rank " + std::to_string(rank) + ") " + text.substr(nl + 1);
  if (kind == "none") return nullptr;
  if (kind == "WorkerLost") return std::make_exception_ptr(WorkerLost(what));
  if (kind == "PeerLost") return std::make_exception_ptr(PeerLost(what));
  if (kind == "ConnectionError") return std::make_exception_ptr(ConnectionError(what));
  if (kind == "AuthError") return std::make_exception_ptr(AuthError(what));
  if (kind == "TimeoutError") return std::make_exception_ptr(TimeoutError(what));
  if (kind == "ShapeError") return std::make_exception_ptr(ShapeError(what));
  if (kind == "ValueError") return std::make_exception_ptr(ValueError(what));
  if (kind == "TypeError") return std::make_exception_ptr(TypeError(what));
  if (kind == "IndexError") return std::make_exception_ptr(IndexError(what));
  if (kind == "Error") return std::make_exception_ptr(Error(what));
  if (kind == "ConformanceFailure") return std::make_exception_ptr(ConformanceFailure(what));
  return std::make_exception_ptr(std::runtime_error(what));
}

std::string as_text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

int launched_rank() { return env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}); }
int launched_size() { return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}); }

std::vector<std::exception_ptr> run_launched_world(const std::string& backend, int n,
                                                   const std::function<void(RankEnv&)>& body,
                                                   const WorldOptions& options) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  if (n != launched_size()) return errors;
  // Every rank makes the same worlds in the same order, so a counter names them alike.
  static int worlds = 0;
  const std::string prefix = "world/" + std::to_string(++worlds) + "/";
  const int rank = launched_rank();
  auto store = std::make_shared<PrefixStore>(prefix, launch_store());
  ThreadSync sync(n, store, options.watchdog);
  std::exception_ptr mine;
  try {
    std::shared_ptr<DataChannel> dc = make_world_channel(backend, store, rank, n, options);
    RankEnv env{*dc, rank, n, sync, store};
    body(env);
    sync.arrive_and_wait();
  } catch (...) {
    mine = std::current_exception();
    sync.break_all();
  }
  store->set("errors/" + std::to_string(rank), encode_error(mine));
  for (int r = 0; r < n; ++r) {
    if (r == rank) {
      errors[static_cast<size_t>(r)] = mine;
      continue;
    }
    try {
      errors[static_cast<size_t>(r)] =
          decode_error(as_text(store->get("errors/" + std::to_string(r), options.watchdog)), r);
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = std::make_exception_ptr(
          ConformanceFailure("rank " + std::to_string(r) + " never reported its outcome: " + e.what()));
    }
  }
  // Rank 0's process serves the store: it leaves only after every rank has read
  // what it needed from it (after the last case it exits).
  // The others say so only once they are done with it for this world.
  store->add("read", 1);
  const auto until = std::chrono::steady_clock::now() + options.watchdog;
  auto wait_for = [&](const char* key, int64_t count) {
    while (store->add(key, 0) < count && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  wait_for("read", n);
  if (rank != 0) {
    store->add("left", 1);  // this rank's last word to the store in this world
  } else {
    wait_for("left", n - 1);
  }
  return errors;
}

std::vector<std::exception_ptr> share_outcomes(RankEnv& env, const std::string& name, std::exception_ptr mine) {
  env.store->set("outcome/" + name + "/" + std::to_string(env.rank), encode_error(mine));
  std::vector<std::exception_ptr> all(static_cast<size_t>(env.size));
  for (int r = 0; r < env.size; ++r) {
    all[static_cast<size_t>(r)] =
        r == env.rank ? mine : decode_error(as_text(env.store->get("outcome/" + name + "/" + std::to_string(r))), r);
  }
  return all;
}

}  // namespace thd::conformance
