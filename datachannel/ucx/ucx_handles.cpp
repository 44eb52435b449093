#include "datachannel/ucx/ucx_handles.h"

#include <cstdlib>

#include "datachannel/check.h"

namespace thd::detail::ucx {

namespace {

constexpr const char* kOp = "ucx backend";

// UCX's shared-memory transports (posix, sysv, xpmem) do not offer peer-failure
// handling unless asked to, and an endpoint with UCP_ERR_HANDLING_MODE_PEER then
// skips them: ranks on one host would talk over TCP loopback, or, with
// UCX_TLS=sm, not at all. The pipe turns it on (UCX then watches shm peers with
// keepalive) unless the user has chosen for any of these transports.
constexpr const char* kShmErrorHandlingKeys[] = {"MM_ERROR_HANDLING", "POSIX_ERROR_HANDLING", "SYSV_ERROR_HANDLING",
                                                 "XPMEM_ERROR_HANDLING"};

bool set_by_user(const PipeSettings& settings, const std::string& name) {
  for (const auto& [key, value] : settings.ucx_config) {
    if (key == name) return true;
  }
  return std::getenv(("UCX_" + name).c_str()) != nullptr;
}

// Whether UCX_TLS lets UCX use a shared-memory transport: unset, "all", an
// exclusion list ("^..."), or a list naming one.
bool may_use_shm(const std::string& tls) {
  if (tls.empty() || tls == "all" || tls.front() == '^') return true;
  for (const char* name : {"sm", "shm", "mm", "posix", "sysv", "xpmem"}) {
    std::string::size_type at = 0;
    const std::string needle = name;
    while ((at = tls.find(needle, at)) != std::string::npos) {
      const bool starts = at == 0 || tls[at - 1] == ',';
      const size_t after = at + needle.size();
      const bool ends = after == tls.size() || tls[after] == ',';
      if (starts && ends) return true;
      at = after;
    }
  }
  return false;
}

void shm_error_handling_default(ucp_config_t* config, const PipeSettings& settings, int rank) {
  for (const char* key : kShmErrorHandlingKeys) {
    if (set_by_user(settings, key)) return;
  }
  // Elsewhere UCX would warn that the setting went unused.
  if (!may_use_shm(effective_setting(settings, "TLS", ""))) return;
  // posix and sysv read it from their shared "MM_" table, the only name that
  // reaches them through ucp_config_modify.
  ucs_status_t status = ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1,
                 "UCX rejected UCX_MM_ERROR_HANDLING=y: {} (this UCX may be too old; 1.13 is known to work)",
                 ucs_status_string(status));
  }
  // Shared-memory peers are watched by keepalive only: UCX's 20 s default would let
  // a killed rank go unnoticed for that long; thd promises PeerLost within seconds.
  if (set_by_user(settings, "KEEPALIVE_INTERVAL")) return;
  status = ucp_config_modify(config, "KEEPALIVE_INTERVAL", "500ms");
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1, "UCX rejected UCX_KEEPALIVE_INTERVAL=500ms: {}",
                 ucs_status_string(status));
  }
}

}  // namespace

std::string effective_setting(const PipeSettings& settings, const std::string& name, const std::string& unset) {
  for (auto it = settings.ucx_config.rbegin(); it != settings.ucx_config.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  const char* env = std::getenv(("UCX_" + name).c_str());
  return env != nullptr ? env : unset;
}

UniqueConfig read_config(const PipeSettings& settings, int rank) {
  ucp_config_t* raw = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &raw);
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1,
                 "ucp_config_read failed: {}. One of the UCX_* environment variables has a value UCX cannot parse; "
                 "`ucx_info -c` lists the variables and their defaults",
                 ucs_status_string(status));
  }
  UniqueConfig config(raw);
  for (const auto& [key, value] : settings.ucx_config) {
    status = ucp_config_modify(config.get(), key.c_str(), value.c_str());
    if (status != UCS_OK) {
      THD_THROW_AT(ValueError, kOp, rank, -1,
                   "UCX rejected the setting {}={}: {} (names go without the UCX_ prefix, "
                   "as in `ucx_info -c`)",
                   key, value, ucs_status_string(status));
    }
  }
  shm_error_handling_default(config.get(), settings, rank);
  return config;
}

UniqueContext create_context(ucp_config_t* config, const ContextShape& shape, const PipeSettings& settings, int rank) {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_REQUEST_INIT |
                      UCP_PARAM_FIELD_TAG_SENDER_MASK | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.request_size = shape.request_size;
  params.request_init = shape.request_init;
  // The sender's rank bits (tag_layout.h): lets UCX's tag offload tell senders apart.
  params.tag_sender_mask = 0x7fffffffULL << 32;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<size_t>(shape.world_size);
  ucp_context_h raw = nullptr;
  ucs_status_t status = ucp_init(&params, config, &raw);
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1,
                 "ucp_init failed: {}. UCX found no usable transport with UCX_TLS={} and UCX_NET_DEVICES={} "
                 "(`ucx_info -d` lists what it sees); set UCX_TLS=tcp,self to use TCP, or UCX_TLS=sm,self on one host",
                 ucs_status_string(status), effective_setting(settings, "TLS", "all"),
                 effective_setting(settings, "NET_DEVICES", "all"));
  }
  return UniqueContext(raw);
}

UniqueWorker create_worker(ucp_context_h context, int rank) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // SERIALIZED, not SINGLE: the calls come one at a time but from whichever
  // thread holds PipeTransport's lock, and SINGLE promises one thread only.
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h raw = nullptr;
  ucs_status_t status = ucp_worker_create(context, &params, &raw);
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1,
                 "ucp_worker_create failed: {}. UCX could not open its transports' resources (devices, shared "
                 "memory, event fds); check UCX_TLS / UCX_NET_DEVICES and the process's limits (ulimit -n, /dev/shm)",
                 ucs_status_string(status));
  }
  return UniqueWorker(raw);
}

std::vector<uint8_t> worker_address(ucp_worker_h worker, int rank) {
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  ucs_status_t status = ucp_worker_query(worker, &attr);
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1, "ucp_worker_query (address) failed: {}", ucs_status_string(status));
  }
  auto release = [worker](ucp_address_t* address) { ucp_worker_release_address(worker, address); };
  std::unique_ptr<ucp_address_t, decltype(release)> owned(attr.address, release);
  const auto* bytes = reinterpret_cast<const uint8_t*>(owned.get());
  return std::vector<uint8_t>(bytes, bytes + attr.address_length);
}

}  // namespace thd::detail::ucx
