#include "worker/exec_context.h"

#include <algorithm>

#include "worker/graphs.h"

#include "protocol/framing.h"
#include "tensor/check.h"
#include "worker/session.h"
#include "worker/sizes.h"

namespace thd::worker {

namespace fb = protocol::fb;

ExecContext::ExecContext(Session& session, uint32_t stream)
    : session_(session), stream_(stream), gpu_(/*own=*/stream != 0) {}

int ExecContext::node() const { return session_.node(); }
DataChannel& ExecContext::channel() { return session_.channel(); }
HandleTable& ExecContext::table() { return session_.table(); }
std::chrono::milliseconds ExecContext::timeout() const { return session_.timeout(); }

void ExecContext::begin(const fb::Command& command, Prepared prepared) {
  op_id_ = command.id();
  op_device_ = Device::cpu();
  op_device_known_ = false;
  command_ = &command;
  prepared_ = std::move(prepared);
  outputs_.clear();
  accesses_.clear();
}

void ExecContext::fresh(uint64_t id) {
  if (id == 0) THD_THROW(ValueError, op_name(), "the op's output id is 0, which means \"no tensor\"");
  const bool redefined = prepared_.graph != nullptr && prepared_.graph->graph->owns(prepared_.index, id);
  if (!redefined && table().live(id)) {
    THD_THROW(ValueError, op_name(), "output tensor id {} is already in use (the master never reuses an id)", id);
  }
  outputs_.push_back(id);
}

void ExecContext::target(uint64_t id) {
  if (id == 0) return;
  outputs_.push_back(id);
  if (session_.check() != nullptr) {
    if (const Entry* e = find(id)) {
      if (auto a = StreamCheck::access_of(e->tensor, id, /*write=*/true)) accesses_.push_back(*a);
    }
  }
}

const Entry* ExecContext::find(uint64_t id) const {
  if (prepared_.graph != nullptr) return prepared_.graph->graph->lookup(prepared_.index, id, session_.table());
  return session_.table().find(id);
}

const Tensor& ExecContext::input(uint64_t id) {
  const Entry* e = find(id);
  if (e == nullptr) {
    THD_THROW(ValueError, op_name(), "{}", session_.graphs().not_live(id, node()));
  }
  if (auto p = poison_of(e)) throw PoisonedInput{std::move(p)};
  if (!op_device_known_) {
    op_device_ = e->tensor.storage()->device();  // not poisoned: defined
    op_device_known_ = true;
  }
  if (session_.check() != nullptr) {
    // A target read as an input (in-place ops) is already a write.
    const bool written = std::find(outputs_.begin(), outputs_.end(), id) != outputs_.end();
    if (!written) {
      if (auto a = StreamCheck::access_of(e->tensor, id, /*write=*/false)) accesses_.push_back(*a);
    }
  }
  return e->tensor;
}

const Tensor* ExecContext::reusable(uint64_t id) {
  if (prepared_.graph == nullptr || inherited_ || session_.check() != nullptr) return nullptr;
  if (!prepared_.graph->graph->owns(prepared_.index, id)) return nullptr;
  const Entry* e = find(id);
  if (e == nullptr || e->poison || !e->tensor.defined()) return nullptr;
  return &e->tensor;
}

void ExecContext::define(uint64_t id, Tensor tensor) {
  if (inherited_) throw PoisonedInput{inherited_};
  if (StreamCheck* check = session_.check()) check->defined(tensor);
  // fresh() let a graph's replay through only for the ids the graph owns.
  if (prepared_.graph != nullptr) {
    table().assign(id, std::move(tensor));
  } else {
    table().define(id, std::move(tensor));
  }
}

void ExecContext::reserve(uint64_t bytes, Device device) const {
  if (device.is_cpu() && session_.host_fits(bytes)) return;  // the common case, without building the op's name
  session_.reserve(bytes, op_name(), device);
}

void ExecContext::check_view(const Tensor& view) const {
  session_.check_extent(bytes_of(numel_of(view.shape()), view.dtype()), op_name(), view.device());
}

std::shared_ptr<const Poison> ExecContext::poison_of(const Entry* entry) const {
  if (entry != nullptr && entry->poison) return entry->poison;
  return inherited_;
}

std::shared_ptr<const Poison> ExecContext::new_poison(const std::string& message, ErrorKind kind) const {
  const uint64_t graph = prepared_.graph != nullptr ? prepared_.graph->graph->id() : 0;
  const uint64_t replay = prepared_.graph != nullptr ? prepared_.graph->replay : 0;
  return std::make_shared<const Poison>(Poison{op_id_, op_name(), message, node(), kind, graph, replay});
}

void ExecContext::fail(std::shared_ptr<const Poison> poison, bool report) {
  for (uint64_t id : outputs_) table().poison(id, poison);
  if (!report) {
    if (!first_error_) first_error_ = std::move(poison);
    return;
  }
  fail_outside_command(std::move(poison));
}

void ExecContext::fail_outside_command(std::shared_ptr<const Poison> poison) {
  if (!first_error_) first_error_ = poison;
  flatbuffers::FlatBufferBuilder b(256);
  auto body = fb::CreateOpFailed(b, poison->op_id, b.CreateString(poison->op_name), b.CreateString(poison->message),
                                 protocol::to_fb(poison->kind), poison->graph, poison->replay);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::OpFailed, body.Union()));
  reply({b.GetBufferPointer(), b.GetSize()});
}

void ExecContext::inherit(std::shared_ptr<const Poison> poison) {
  if (!poison) return;
  if (!inherited_) inherited_ = poison;
  if (!first_error_) first_error_ = std::move(poison);
}

void ExecContext::clear_errors() {
  first_error_ = nullptr;
  inherited_ = nullptr;
}

void ExecContext::flow(uint64_t id, bool begin) {
  trace::Recorder* rec = session_.recorder();
  if (rec == nullptr) return;
  rec->flow(id, session_.trace_pid(), static_cast<int32_t>(stream_), trace::now_ns(),
            begin ? trace::FlowPhase::Begin : trace::FlowPhase::End);
}

DataChannel& ExecContext::group(const std::vector<int>& nodes) { return session_.group(nodes); }
void ExecContext::reply(std::span<const uint8_t> message) { session_.reply(message); }
uint64_t ExecContext::replies_sent() const { return session_.replies_sent(); }

}  // namespace thd::worker
