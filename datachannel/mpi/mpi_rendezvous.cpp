// The MPI rendezvous: MPI already knows every rank, so the store's address (and a
// token, when the job was given none) travels over MPI_COMM_WORLD instead of
// through MASTER_ADDR/MASTER_PORT.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <mpi.h>

#include "datachannel/check.h"
#include "datachannel/mpi/mpi_library.h"
#include "datachannel/mpi/mpi_rendezvous.h"
#include "datachannel/net/auth.h"

namespace thd::detail::mpi {

namespace {

constexpr const char* kOp = "rendezvous (mpi://)";

// Rank 0's string to every rank, length first.
std::string broadcast(std::string value, int rank) {
  int length = rank == 0 ? static_cast<int>(value.size()) : 0;
  check(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD), kOp, "MPI_Bcast");
  value.resize(static_cast<size_t>(length));
  check(MPI_Bcast(value.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD), kOp, "MPI_Bcast");
  return value;
}

std::string random_token() {
  std::string token;
  for (int i = 0; i < 2; ++i) {
    const net::Nonce n = net::random_nonce();
    for (uint8_t b : n) token += fmt::format("{:02x}", b);
  }
  return token;
}

// Whether every rank runs on this host: then the store stays on loopback.
bool all_ranks_on_this_host(int size) {
  MPI_Comm local = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), kOp,
        "MPI_Comm_split_type");
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int all = local_size == size ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), kOp, "MPI_Allreduce");
  return all == 1;
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
  int any_missing = have_token ? 0 : 1;
  check(MPI_Allreduce(MPI_IN_PLACE, &any_missing, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), kOp, "MPI_Allreduce");
  if (any_missing) {
    // No rank was given a secret: rank 0 makes one and MPI hands it to the others,
    // never through the environment of the launcher or a command line.
    token = broadcast(rank == 0 ? random_token() : std::string(), rank);
    ::setenv("THD_AUTH_TOKEN", token->c_str(), 1);
  }

  const bool local = all_ranks_on_this_host(size);
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
  address = broadcast(address, rank);
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
