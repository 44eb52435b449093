// The worker's command loop: one master session, batches verified before they are
// read, executed in order, failures turned into poison and error replies.
#include "worker/worker.h"

#include "protocol/codec.h"
#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/log.h"
#include "worker/ops.h"

namespace thd::worker {

namespace {

using protocol::fb::Body;

constexpr std::chrono::milliseconds kPoll{1000};

void reply_error(ExecContext& ctx, const std::string& what, const std::string& message) {
  flatbuffers::FlatBufferBuilder b(256);
  auto body = fb::CreateOpFailed(b, 0, b.CreateString(what), b.CreateString(message));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, Body::OpFailed, body.Union()));
  ctx.reply({b.GetBufferPointer(), b.GetSize()});
}

void reply_hello(ExecContext& ctx, bool accepted, const std::string& error) {
  flatbuffers::FlatBufferBuilder b(128);
  auto body = fb::CreateHelloReply(b, protocol::kVersion, ctx.node(), accepted, b.CreateString(error));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, Body::HelloReply, body.Union()));
  ctx.reply({b.GetBufferPointer(), b.GetSize()});
}

// Posts the receives of the batch's uploads at once, straight into their tensors,
// so the bytes that follow the batch land without a staging copy.
void post_uploads(ExecContext& ctx, const fb::CommandBatch& batch) {
  for (const fb::Command* c : *batch.commands()) {
    const fb::Upload* up = c->op_as_Upload();
    if (up == nullptr) continue;
    try {
      Tensor t = Tensor::empty(protocol::shape_from_fb(up->shape(), "dist_send"), protocol::from_fb(up->dtype()));
      Request r = ctx.channel().irecv(t, 0, {.tag = protocol::kUploadTag, .timeout = ctx.timeout()});
      ctx.uploads()[up->out()] = {std::move(t), std::move(r)};
    } catch (const std::exception&) {
      // Left unannounced: the Upload command then fails and poisons its tensor.
    }
  }
}

void run_batch(ExecContext& ctx, const fb::CommandBatch& batch) {
  if (batch.commands() != nullptr) {
    post_uploads(ctx, batch);
    for (const fb::Command* c : *batch.commands()) dispatch(ctx, *c);
    ctx.uploads().clear();
  }
  if (batch.want_ack()) {
    flatbuffers::FlatBufferBuilder b(64);
    auto body = fb::CreateAck(b, batch.seq());
    b.Finish(fb::CreateMessage(b, protocol::kVersion, Body::Ack, body.Union()));
    ctx.reply({b.GetBufferPointer(), b.GetSize()});
  }
}

bool is_master_lost(const PeerLost& e) { return e.context().peer == 0; }

}  // namespace

const char* session_end_name(SessionEnd end) {
  switch (end) {
    case SessionEnd::Goodbye: return "goodbye";
    case SessionEnd::MasterLost: return "master lost";
    case SessionEnd::Refused: return "refused";
  }
  return "unknown";
}

SessionEnd serve(const std::shared_ptr<DataChannel>& channel) {
  ExecContext ctx(channel);
  protocol::MessageReceiver commands(channel, 0, protocol::kCommandTag, protocol::kMaxMessageBytes);
  protocol::Received m;
  try {
    for (;;) {
      try {
        if (!commands.next(m, kPoll, ctx.timeout())) continue;
      } catch (const protocol::ProtocolError& e) {
        reply_error(ctx, "receive", e.what());
        continue;
      }
      const fb::Message* message = nullptr;
      try {
        message = &protocol::verify_message(m.bytes, "worker");
      } catch (const protocol::ProtocolError& e) {
        reply_error(ctx, "verify", e.what());
        continue;
      }
      switch (message->body_type()) {
        case Body::Hello: {
          const fb::Hello* h = message->body_as_Hello();
          if (h->version() != protocol::kVersion || h->node() != ctx.node() ||
              h->num_nodes() != channel->size() - 1) {
            reply_hello(ctx, false,
                        fmt::format("worker node {} of {} (protocol {}) cannot serve a master that expects node {} of "
                                    "{} (protocol {})",
                                    ctx.node(), channel->size() - 1, protocol::kVersion, h->node(), h->num_nodes(),
                                    h->version()));
            return SessionEnd::Refused;
          }
          ctx.generator().manual_seed(node_seed(h->seed(), ctx.node()));
          reply_hello(ctx, true, "");
          break;
        }
        case Body::Goodbye:
          return SessionEnd::Goodbye;
        case Body::CommandBatch:
          run_batch(ctx, *message->body_as_CommandBatch());
          break;
        case Body::NONE:
        case Body::HelloReply:
        case Body::Ack:
        case Body::OpFailed:
        case Body::FetchFailed:
        case Body::SyncDone:
          reply_error(ctx, "receive",
                      fmt::format("a worker does not accept {} messages", fb::EnumNameBody(message->body_type())));
          break;
      }
    }
  } catch (const PeerLost& e) {
    if (!is_master_lost(e)) throw;
    THD_LOG_INFO("worker node {}: master lost ({}); ending the session", ctx.node(), e.what());
    return SessionEnd::MasterLost;
  }
}

}  // namespace thd::worker
