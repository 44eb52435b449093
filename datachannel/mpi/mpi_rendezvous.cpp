// The MPI rendezvous: MPI already knows every rank, so the store's address (and a
// token, when the job was given none) travels over MPI_COMM_WORLD instead of
// through MASTER_ADDR/MASTER_PORT.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>

#include "datachannel/check.h"
#include "datachannel/mpi/mpi_library.h"
#include "datachannel/mpi/mpi_rendezvous.h"
#include "datachannel/mpi/mpi_wait.h"
#include "datachannel/net/auth.h"

namespace thd::detail::mpi {

namespace {

constexpr const char* kOp = "rendezvous (mpi://)";

// The rendezvous's collectives over MPI_COMM_WORLD, each nonblocking and waited
// for within the rendezvous's deadline (mpi_wait.h).
class WorldCalls {
 public:
  explicit WorldCalls(std::chrono::milliseconds timeout)
      : timeout_(timeout), deadline_(net::deadline_after(timeout)) {}

  // The largest of every rank's `value`.
  int max(int value) {
    auto v = std::make_shared<int>(value);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, v.get(), 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &request), kOp,
          "MPI_Iallreduce");
    wait_within(request, deadline_, timeout_, kOp, "MPI_Iallreduce", v);
    return *v;
  }

  // Rank 0's string to every rank, length first.
  std::string broadcast(const std::string& value, int rank) {
    auto length = std::make_shared<int>(rank == 0 ? static_cast<int>(value.size()) : 0);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibcast(length.get(), 1, MPI_INT, 0, MPI_COMM_WORLD, &request), kOp, "MPI_Ibcast");
    wait_within(request, deadline_, timeout_, kOp, "MPI_Ibcast", length);
    auto text = std::make_shared<std::string>(rank == 0 ? value : std::string());
    text->resize(static_cast<size_t>(*length));
    check(MPI_Ibcast(text->data(), *length, MPI_CHAR, 0, MPI_COMM_WORLD, &request), kOp, "MPI_Ibcast");
    wait_within(request, deadline_, timeout_, kOp, "MPI_Ibcast", text);
    return *text;
  }

  // Whether every rank runs on this host (the same host name): then the store
  // stays on loopback.
  bool all_on_this_host(int size) {
    constexpr size_t kName = 256;
    auto names = std::make_shared<std::vector<char>>(kName * (static_cast<size_t>(size) + 1), '\0');
    char* mine = names->data() + kName * static_cast<size_t>(size);
    if (::gethostname(mine, kName - 1) != 0) mine[0] = '\0';
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(mine, static_cast<int>(kName), MPI_CHAR, names->data(), static_cast<int>(kName), MPI_CHAR,
                         MPI_COMM_WORLD, &request),
          kOp, "MPI_Iallgather");
    wait_within(request, deadline_, timeout_, kOp, "MPI_Iallgather", names);
    for (int r = 0; r < size; ++r) {
      if (std::memcmp(names->data() + kName * static_cast<size_t>(r), mine, kName) != 0) return false;
    }
    return true;
  }

 private:
  std::chrono::milliseconds timeout_;
  net::Deadline deadline_;
};

std::string random_token() {
  std::string token;
  for (int i = 0; i < 2; ++i) {
    const net::Nonce n = net::random_nonce();
    for (uint8_t b : n) token += fmt::format("{:02x}", b);
  }
  return token;
}

}  // namespace

RendezvousResult rendezvous(const RendezvousOptions& options) {
  ensure_initialized(kOp);
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  THD_CHECK(options.rank < 0 || options.rank == rank, ValueError, kOp,
            "rank {} was asked for, but this process is MPI rank {} (mpi:// takes the rank from MPI)", options.rank,
            rank);
  THD_CHECK(options.world_size < 0 || options.world_size == size, ValueError, kOp,
            "world_size {} was asked for, but MPI_COMM_WORLD has {} ranks", options.world_size, size);

  std::optional<std::string> token = options.token;
  if (!token) {
    if (auto env = net::process_env("THD_AUTH_TOKEN"); env && !env->empty()) token = *env;
  }
  const bool have_token = !!token || net::process_env("THD_AUTH_TOKEN_FILE").has_value();
  // Every call below is collective: a rank that never joins (one that exited, or is
  // in MPI_Finalize) makes them time out instead of hang.
  WorldCalls world(options.timeout);
  if (world.max(have_token ? 0 : 1) != 0) {
    // No rank was given a secret: rank 0 makes one and MPI hands it to the others,
    // never through the environment of the launcher or a command line.
    token = world.broadcast(rank == 0 ? random_token() : std::string(), rank);
    ::setenv("THD_AUTH_TOKEN", token->c_str(), 1);
  }

  const bool local = world.all_on_this_host(size);
  std::shared_ptr<TCPStore> server;
  std::string address;
  if (rank == 0) {
    TCPStoreOptions o;
    o.host = local ? "127.0.0.1" : "0.0.0.0";
    o.port = 0;
    o.is_server = true;
    o.timeout = options.timeout;
    o.token = token;
    server = std::make_shared<TCPStore>(std::move(o));
    char host[256] = {};
    if (!local && ::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    address = fmt::format("{}\n{}", local || host[0] == '\0' ? "127.0.0.1" : host, server->port());
  }
  address = world.broadcast(address, rank);
  if (rank == 0) return {server, rank, size};
  const size_t nl = address.find('\n');
  TCPStoreOptions o;
  o.host = address.substr(0, nl);
  o.port = static_cast<uint16_t>(std::stoi(address.substr(nl + 1)));
  o.is_server = false;
  o.timeout = options.timeout;
  o.token = token;
  return {std::make_shared<TCPStore>(std::move(o)), rank, size};
}

}  // namespace thd::detail::mpi
