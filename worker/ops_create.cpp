// Creation, uploads and downloads, frees, syncs and seeding.
#include "protocol/framing.h"
#include "tensor/check.h"
#include "worker/ops.h"

namespace thd::worker {

namespace {

Tensor create(ExecContext& ctx, const fb::Create& op) {
  const DType dtype = protocol::from_fb(op.dtype());
  const Shape shape = protocol::shape_from_fb(op.shape(), "create");
  const fb::Scalar none;
  auto scalar = [&](const fb::Scalar* s) { return protocol::from_fb(s != nullptr ? *s : none); };
  switch (op.kind()) {
    case fb::CreateKind::Empty: return Tensor::empty(shape, dtype);
    case fb::CreateKind::Zeros: return Tensor::zeros(shape, dtype);
    case fb::CreateKind::Ones: return Tensor::ones(shape, dtype);
    case fb::CreateKind::Full: return Tensor::full(shape, scalar(op.value()), dtype);
    case fb::CreateKind::Rand: return Tensor::rand(shape, dtype, &ctx.generator());
    case fb::CreateKind::Randn: return Tensor::randn(shape, dtype, &ctx.generator());
    case fb::CreateKind::Randint:
      return Tensor::randint(scalar(op.start()).to_int64(), scalar(op.end()).to_int64(), shape, dtype,
                             &ctx.generator());
    case fb::CreateKind::Arange:
      return Tensor::arange(scalar(op.start()), scalar(op.end()), scalar(op.step()), dtype);
    case fb::CreateKind::Linspace:
      return Tensor::linspace(scalar(op.start()), scalar(op.end()), op.steps(), dtype);
    case fb::CreateKind::Eye: return Tensor::eye(op.rows(), op.cols(), dtype);
  }
  THD_THROW(protocol::ProtocolError, "create", "creation kind {} is not in this protocol version",
            static_cast<int>(op.kind()));
}

}  // namespace

void run(ExecContext& ctx, const fb::Create& op) {
  ctx.fresh(op.out());
  ctx.define(op.out(), create(ctx, op));
}

void run(ExecContext& ctx, const fb::Upload& op) {
  ctx.fresh(op.out());
  auto it = ctx.uploads().find(op.out());
  if (it == ctx.uploads().end()) {
    THD_THROW(protocol::ProtocolError, "dist_send", "upload of tensor {} was not announced in its batch", op.out());
  }
  auto [tensor, request] = std::move(it->second);
  ctx.uploads().erase(it);
  request.wait();
  ctx.define(op.out(), std::move(tensor));
}

void run(ExecContext& ctx, const fb::Fetch& op) {
  const Entry* e = ctx.table().find(op.src());
  const bool tagged = protocol::is_fetch_tag(op.fetch_tag());
  if (e == nullptr || e->poison || !tagged) {
    // The master waits on the fetch's tag: answer with the reason instead.
    Poison unknown;
    const Poison* p = e != nullptr && e->poison ? e->poison.get() : &unknown;
    if (p == &unknown) {
      unknown = Poison{ctx.op_id(), "get",
                       tagged ? fmt::format("tensor id {} is not live on node {} (never created, or already freed)",
                                            op.src(), ctx.node())
                              : fmt::format("fetch tag {} is outside the fetch range", op.fetch_tag()),
                       ctx.node()};
    }
    flatbuffers::FlatBufferBuilder b(256);
    auto body = fb::CreateFetchFailed(b, op.fetch_tag(), p->op_id, b.CreateString(p->op_name),
                                      b.CreateString(p->message), p->node);
    b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::FetchFailed, body.Union()));
    ctx.reply({b.GetBufferPointer(), b.GetSize()});
    return;
  }
  const Tensor bytes = e->tensor.contiguous();
  ctx.channel().send(bytes, 0, {.tag = op.fetch_tag(), .timeout = ctx.timeout()});
}

void run(ExecContext& ctx, const fb::Free& op) {
  if (op.ids() == nullptr) return;
  uint64_t unknown = 0;
  for (uint64_t id : *op.ids()) {
    if (!ctx.table().erase(id) && unknown == 0) unknown = id;
  }
  if (unknown != 0) {
    THD_THROW(ValueError, "free", "tensor id {} is not live on node {} (freed twice, or never created)", unknown,
              ctx.node());
  }
}

void run(ExecContext& ctx, const fb::Sync& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "synchronize", "sync reply tag {} is outside the fetch range", op.reply_tag());
  }
  flatbuffers::FlatBufferBuilder b(64);
  auto body = fb::CreateSyncDone(b, op.sync_id(), ctx.table().size(), ctx.replies_sent());
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::SyncDone, body.Union()));
  protocol::send_message(ctx.channel(), 0, op.reply_tag(), {b.GetBufferPointer(), b.GetSize()}, ctx.timeout());
}

void run(ExecContext& ctx, const fb::ManualSeed& op) { ctx.generator().manual_seed(node_seed(op.seed(), ctx.node())); }

}  // namespace thd::worker
