#include "bench/datachannel/raw_ucx.h"

#include <ucp/api/ucp.h>

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace thd::bench::dc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr ucp_tag_t kTag = 0x7468642d62656e63;  // "thd-benc"

[[noreturn]] void fail(const std::string& what, ucs_status_t status) {
  throw std::runtime_error(fmt::format("raw ucx reference: {}: {}", what, ucs_status_string(status)));
}

void on_recv(void*, ucs_status_t, const ucp_tag_recv_info_t*, void*) {}

}  // namespace

// Torn down in reverse: the endpoint (flushed, bounded), the worker, the context.
struct RawUcxConnection::Handles {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  ~Handles() {
    if (ep != nullptr) {
      ucp_request_param_t param{};
      void* request = ucp_ep_close_nbx(ep, &param);
      const auto until = Clock::now() + std::chrono::seconds(2);
      if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < until) {
          ucp_worker_progress(worker);
        }
        ucp_request_free(request);
      }
    }
    if (worker != nullptr) ucp_worker_destroy(worker);
    if (context != nullptr) ucp_cleanup(context);
  }
};

RawUcxConnection::RawUcxConnection(std::unique_ptr<Handles> handles, std::chrono::milliseconds timeout)
    : h_(std::move(handles)), timeout_(timeout) {}

RawUcxConnection::~RawUcxConnection() = default;

std::unique_ptr<RawUcxConnection> RawUcxConnection::connect(Store& store, const std::string& key, int rank,
                                                            std::chrono::milliseconds timeout) {
  auto h = std::make_unique<Handles>();
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) fail("ucp_config_read", status);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  status = ucp_init(&params, config, &h->context);
  ucp_config_release(config);
  if (status != UCS_OK) fail("ucp_init", status);
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(h->context, &worker_params, &h->worker);
  if (status != UCS_OK) fail("ucp_worker_create", status);

  ucp_address_t* address = nullptr;
  size_t length = 0;
  status = ucp_worker_get_address(h->worker, &address, &length);
  if (status != UCS_OK) fail("ucp_worker_get_address", status);
  const auto* bytes = reinterpret_cast<const uint8_t*>(address);
  store.set(fmt::format("{}/{}", key, rank), std::vector<uint8_t>(bytes, bytes + length));
  ucp_worker_release_address(h->worker, address);
  const std::vector<uint8_t> peer = store.get(fmt::format("{}/{}", key, 1 - rank), timeout);

  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(peer.data());
  status = ucp_ep_create(h->worker, &ep_params, &h->ep);
  if (status != UCS_OK) fail("ucp_ep_create", status);

  std::unique_ptr<RawUcxConnection> connection(new RawUcxConnection(std::move(h), timeout));
  // One message each way: both endpoints' wire-up is done before any timing.
  std::vector<uint8_t> hello(8, static_cast<uint8_t>(rank));
  if (rank == 0) {
    connection->send(hello);
    connection->recv(hello);
  } else {
    connection->recv(hello);
    connection->send(hello);
  }
  return connection;
}

void RawUcxConnection::finish(void* request, const char* what) {
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) fail(what, UCS_PTR_STATUS(request));
  const auto until = Clock::now() + timeout_;
  ucs_status_t status = UCS_INPROGRESS;
  for (unsigned round = 1;; ++round) {
    status = ucp_request_check_status(request);
    if (status != UCS_INPROGRESS) break;
    ucp_worker_progress(h_->worker);
    // The clock now and then: a round of an idle worker costs less than reading it.
    if ((round & 1023U) == 0 && Clock::now() >= until) {
      // Not driven again: the worker goes with the connection, the request with it.
      ucp_request_cancel(h_->worker, request);
      throw std::runtime_error(fmt::format("raw ucx reference: {} did not finish within {} ms", what,
                                           timeout_.count()));
    }
  }
  ucp_request_free(request);
  if (status != UCS_OK) fail(what, status);
}

void RawUcxConnection::send(std::span<const uint8_t> data) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  finish(ucp_tag_send_nbx(h_->ep, data.data(), data.size(), kTag, &param), "send");
}

void RawUcxConnection::recv(std::span<uint8_t> data) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_CALLBACK;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  param.cb.recv = on_recv;
  finish(ucp_tag_recv_nbx(h_->worker, data.data(), data.size(), kTag, ~ucp_tag_t{0}, &param), "recv");
}

}  // namespace thd::bench::dc
