#include "worker/exec_context.h"

#include "protocol/framing.h"
#include "tensor/check.h"

namespace thd::worker {

namespace fb = protocol::fb;

ExecContext::ExecContext(std::shared_ptr<DataChannel> channel)
    : channel_(std::move(channel)), node_(channel_->rank() - 1) {}

void ExecContext::begin(const fb::Command& command) {
  op_id_ = command.id();
  command_ = &command;
  outputs_.clear();
}

void ExecContext::fresh(uint64_t id) {
  if (id == 0) THD_THROW(ValueError, op_name(), "the op's output id is 0, which means \"no tensor\"");
  if (table_.find(id) != nullptr) {
    THD_THROW(ValueError, op_name(), "output tensor id {} is already in use (the master never reuses an id)", id);
  }
  outputs_.push_back(id);
}

void ExecContext::target(uint64_t id) {
  if (id != 0) outputs_.push_back(id);
}

const Tensor& ExecContext::input(uint64_t id) {
  const Entry* e = table_.find(id);
  if (e == nullptr) {
    THD_THROW(ValueError, op_name(), "tensor id {} is not live on node {} (never created, or already freed)", id,
              node_);
  }
  if (e->poison) throw PoisonedInput{e->poison};
  return e->tensor;
}

void ExecContext::define(uint64_t id, Tensor tensor) { table_.define(id, std::move(tensor)); }

std::shared_ptr<const Poison> ExecContext::new_poison(const std::string& message) const {
  return std::make_shared<const Poison>(Poison{op_id_, op_name(), message, node_});
}

void ExecContext::fail(std::shared_ptr<const Poison> poison, bool report) {
  for (uint64_t id : outputs_) table_.poison(id, poison);
  if (!report) return;
  flatbuffers::FlatBufferBuilder b(256);
  auto body = fb::CreateOpFailed(b, poison->op_id, b.CreateString(poison->op_name), b.CreateString(poison->message));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::OpFailed, body.Union()));
  reply({b.GetBufferPointer(), b.GetSize()});
}

DataChannel& ExecContext::group(const std::vector<int>& nodes) {
  auto it = groups_.find(nodes);
  if (it != groups_.end()) return *it->second;
  std::vector<int> ranks;
  ranks.reserve(nodes.size());
  for (int n : nodes) ranks.push_back(n + 1);
  auto g = channel_->new_group(std::move(ranks));
  return *groups_.emplace(nodes, std::move(g)).first->second;
}

void ExecContext::reply(std::span<const uint8_t> message) {
  protocol::send_message(*channel_, 0, protocol::kReplyTag, message, timeout());
  ++replies_sent_;
}

}  // namespace thd::worker
