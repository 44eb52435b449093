// Creation, uploads and downloads, frees, syncs and seeding.
#include <cmath>

#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/into_creation.h"
#include "worker/ops.h"
#include "worker/replay_into.h"
#include "worker/session.h"
#include "worker/sizes.h"

namespace thd::worker {

namespace {

// arange over integers steps in int64: a range whose width plus its step does not
// fit there would overflow in the tensor library (undefined behaviour), so it is
// refused here (all its values fit in int64 by then).
void check_integer_arange(const Scalar& start, const Scalar& end, const Scalar& step) {
  const __int128 width = static_cast<__int128>(end.to_int64()) - start.to_int64();
  const __int128 stride = step.to_int64();
  const __int128 reach = (width < 0 ? -width : width) + (stride < 0 ? -stride : stride);
  if (reach > INT64_MAX) {
    THD_THROW(ValueError, "arange", "arange({}, {}, {}) steps past the range of int64", start.to_int64(),
              end.to_int64(), step.to_int64());
  }
}

// Elements of arange(start, end, step): 0 where the op refuses its arguments.
uint64_t arange_numel(double start, double end, double step) {
  if (!std::isfinite(start) || !std::isfinite(end) || !(step != 0)) return 0;
  const double n = std::ceil((end - start) / step);
  if (!(n > 0)) return 0;
  return n >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(n);
}

Scalar scalar_of(const fb::Scalar* s) { return protocol::from_fb(s != nullptr ? *s : fb::Scalar()); }

// What a Create makes, in elements, before it is made.
uint64_t create_numel(const fb::Create& op, const Shape& shape) {
  switch (op.kind()) {
    case fb::CreateKind::Arange:
      return arange_numel(scalar_of(op.start()).to_double(), scalar_of(op.end()).to_double(), scalar_of(op.step()).to_double());
    case fb::CreateKind::Linspace: return static_cast<uint64_t>(std::max<int64_t>(op.steps(), 0));
    case fb::CreateKind::Eye: return numel_of(std::vector<int64_t>{op.rows(), op.cols() < 0 ? op.rows() : op.cols()});
    default: return numel_of(shape);
  }
}

// On the CPU: the kinds the tensor library makes on the host only.
Tensor create_on_host(ExecContext& ctx, const fb::Create& op, const Shape& shape, DType dtype) {
  switch (op.kind()) {
    case fb::CreateKind::Empty: return Tensor::empty(shape, dtype);
    case fb::CreateKind::Zeros: return Tensor::zeros(shape, dtype);
    case fb::CreateKind::Ones: return Tensor::ones(shape, dtype);
    case fb::CreateKind::Full: return Tensor::full(shape, scalar_of(op.value()), dtype);
    case fb::CreateKind::Rand: return Tensor::rand(shape, dtype, &ctx.generator());
    case fb::CreateKind::Randn: return Tensor::randn(shape, dtype, &ctx.generator());
    case fb::CreateKind::Randint:
      return Tensor::randint(scalar_of(op.start()).to_int64(), scalar_of(op.end()).to_int64(), shape, dtype,
                             &ctx.generator());
    case fb::CreateKind::Arange: {
      const Scalar start = scalar_of(op.start()), end = scalar_of(op.end()), step = scalar_of(op.step());
      const bool floating =
          start.is_floating_point() || end.is_floating_point() || step.is_floating_point() || is_floating_point(dtype);
      if (!floating) check_integer_arange(start, end, step);
      return Tensor::arange(start, end, step, dtype);
    }
    case fb::CreateKind::Linspace:
      return Tensor::linspace(scalar_of(op.start()), scalar_of(op.end()), op.steps(), dtype);
    case fb::CreateKind::Eye: return Tensor::eye(op.rows(), op.cols(), dtype);
  }
  THD_THROW(protocol::ProtocolError, "create", "creation kind {} is not in this protocol version",
            static_cast<int>(op.kind()));
}

Tensor create(ExecContext& ctx, const fb::Create& op) {
  const DType dtype = protocol::from_fb(op.dtype());
  const Shape shape = protocol::shape_from_fb(op.shape(), "create");
  const Device device = protocol::from_fb(op.device());
  const uint64_t bytes = bytes_of(create_numel(op, shape), dtype);
  ctx.reserve(bytes, device);  // a device this node does not have is refused here
  if (device.is_cpu()) return create_on_host(ctx, op, shape, dtype);
  switch (op.kind()) {
    // Made on the device itself: no bytes cross the bus.
    case fb::CreateKind::Empty: return Tensor::empty(shape, dtype, device);
    case fb::CreateKind::Zeros: return Tensor::zeros(shape, dtype, device);
    case fb::CreateKind::Ones: return Tensor::ones(shape, dtype, device);
    case fb::CreateKind::Full: return Tensor::full(shape, scalar_of(op.value()), dtype, device);
    // Made on the host and copied: random draws come from the stream's generator, so
    // a GPU tensor holds the very values its CPU twin would (reproducible per seed
    // and node, whatever the device).
    default:
      ctx.reserve(bytes, Device::cpu());
      return create_on_host(ctx, op, shape, dtype).to(device);
  }
}

// arange, linspace and eye into `kept` on the CPU, when it holds as many elements as
// the op reserves for (the op's memory check, which then passes, comes before its
// argument checks); false when the op makes a new tensor instead.
bool sequence_into(const Tensor& kept, const fb::Create& op) {
  const DType dtype = protocol::from_fb(op.dtype());
  if (!protocol::from_fb(op.device()).is_cpu() || kept.numel() == 0 ||
      create_numel(op, protocol::shape_from_fb(op.shape(), "create")) != static_cast<uint64_t>(kept.numel())) {
    return false;
  }
  switch (op.kind()) {
    case fb::CreateKind::Arange: {
      const Scalar start = scalar_of(op.start()), end = scalar_of(op.end()), step = scalar_of(op.step());
      const bool floating =
          start.is_floating_point() || end.is_floating_point() || step.is_floating_point() || is_floating_point(dtype);
      if (!floating) check_integer_arange(start, end, step);
      return detail::arange_into(kept, start, end, step, dtype);
    }
    case fb::CreateKind::Linspace:
      return detail::linspace_into(kept, scalar_of(op.start()), scalar_of(op.end()), op.steps(), dtype);
    case fb::CreateKind::Eye: return detail::eye_into(kept, op.rows(), op.cols(), dtype);
    default: return false;
  }
}

// In a graph's replay: the constant creations written into the storage the
// previous replay's tensor holds, when it has the very shape, dtype and device;
// false when the op makes a new tensor instead.
bool create_into(ExecContext& ctx, const fb::Create& op) {
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  switch (op.kind()) {
    case fb::CreateKind::Arange:
    case fb::CreateKind::Linspace:
    case fb::CreateKind::Eye: return sequence_into(*kept, op);
    case fb::CreateKind::Empty:
    case fb::CreateKind::Zeros:
    case fb::CreateKind::Ones:
    case fb::CreateKind::Full: break;
    default: return false;
  }
  if (kept->dtype() != protocol::from_fb(op.dtype()) || kept->device() != protocol::from_fb(op.device()) ||
      !kept->is_contiguous() || kept->shape() != protocol::shape_from_fb(op.shape(), "create")) {
    return false;
  }
  Tensor& out = const_cast<Tensor&>(*kept);
  switch (op.kind()) {
    case fb::CreateKind::Zeros: out.fill_(0); break;
    case fb::CreateKind::Ones: out.fill_(1); break;
    case fb::CreateKind::Full: out.fill_(scalar_of(op.value())); break;
    default: break;  // empty: any contents will do
  }
  return true;
}

}  // namespace

void run(ExecContext& ctx, const fb::Create& op) {
  ctx.fresh(op.out());
  if (create_into(ctx, op) || write_kept(ctx, op)) return;
  ctx.define(op.out(), create(ctx, op));
}

UploadSpec upload_spec(Session& session, const fb::Upload& op) {
  UploadSpec spec{protocol::shape_from_fb(op.shape(), "dist_send"), protocol::from_fb(op.dtype())};
  // The bytes land in host memory first, whatever the tensor's device.
  session.reserve(bytes_of(numel_of(spec.shape), spec.dtype), "dist_send");
  return spec;
}

void run(ExecContext& ctx, const fb::Upload& op) {
  ctx.fresh(op.out());
  auto upload = ctx.session().take_upload(op.out());
  if (!upload) {
    (void)upload_spec(ctx.session(), op);  // the reason it was not received, if it was refused
    THD_THROW(protocol::ProtocolError, "dist_send", "upload of tensor {} was not announced in its batch", op.out());
  }
  auto& [tensor, request] = *upload;
  request.wait();
  // Checked once the bytes are in: a refused device must not leave the master's
  // send waiting.
  const Device device = protocol::from_fb(op.device());
  if (device.is_cpu()) return ctx.define(op.out(), std::move(tensor));
  ctx.reserve(tensor.nbytes(), device);
  Tensor on_device = tensor.to(device);
  tensor = Tensor();  // the host copy goes now, not when the Upload's command is done
  ctx.define(op.out(), std::move(on_device));
}

void answer_fetch_failed(ExecContext& ctx, const fb::Fetch& op, const Poison& why) {
  flatbuffers::FlatBufferBuilder b(256);
  auto body = fb::CreateFetchFailed(b, op.fetch_tag(), why.op_id, b.CreateString(why.op_name),
                                    b.CreateString(why.message), why.node, protocol::to_fb(why.kind), why.graph,
                                    why.replay);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::FetchFailed, body.Union()));
  ctx.reply({b.GetBufferPointer(), b.GetSize()});
}

void run(ExecContext& ctx, const fb::Fetch& op) {
  const Entry* e = ctx.table().find(op.src());
  const bool tagged = protocol::is_fetch_tag(op.fetch_tag());
  const auto poison = e != nullptr ? ctx.poison_of(e) : nullptr;
  if (e == nullptr || poison || !tagged) {
    // The master waits on the fetch's tag: answer with the reason instead.
    Poison unknown;
    const Poison* p = poison ? poison.get() : &unknown;
    if (p == &unknown) {
      unknown = Poison{ctx.op_id(), "get",
                       tagged ? ctx.session().graphs().not_live(op.src(), ctx.node())
                              : fmt::format("fetch tag {} is outside the fetch range", op.fetch_tag()),
                       ctx.node(), ErrorKind::Value};
    }
    answer_fetch_failed(ctx, op, *p);
    return;
  }
  if (needs_host_copy(e->tensor)) {
    try {
      ctx.reserve(bytes_of(numel_of(e->tensor.shape()), e->tensor.dtype()), Device::cpu());
    } catch (const Error& refused) {  // the master waits on the fetch's tag, not for an OpFailed
      answer_fetch_failed(ctx, op, Poison{ctx.op_id(), "get", refused.message(), ctx.node(), error_kind_of(refused)});
      return;
    }
  }
  const Tensor bytes = host_contiguous(e->tensor);
  ctx.channel().send(bytes, 0, {.tag = op.fetch_tag(), .timeout = ctx.timeout()});
  // get() returns once this stream got here: the master's next ops come after it.
  if (StreamCheck* check = ctx.session().check()) {
    check->checker().on_host_wait(check->checker().clock(check->key(ctx.stream())));
  }
}

void run(ExecContext& ctx, const fb::Free& op) {
  if (op.ids() == nullptr) return;
  const std::vector<uint64_t> ids = protocol::scalars_of(op.ids());
  if (const uint64_t unknown = free_tensors(ctx.session(), ids, ctx.op_id())) {
    THD_THROW(ValueError, "free", "tensor id {} is not live on node {} (freed twice, or never created)", unknown,
              ctx.node());
  }
}

uint64_t free_tensors(Session& session, std::span<const uint64_t> ids, uint64_t op_id) {
  if (session.streams().idle()) return erase_tensors(session, ids);
  const Poison op{op_id, "free", "", session.node(), ErrorKind::Value};
  session.streams().after_current_work([&session, ids = std::vector<uint64_t>(ids.begin(), ids.end()), op] {
    if (const uint64_t unknown = erase_tensors(session, ids)) {
      report_failure(session, op,
                     fmt::format("tensor id {} is not live on node {} (freed twice, or never created)", unknown,
                                 session.node()),
                     ErrorKind::Value);
    }
  });
  return 0;
}

void run(ExecContext& ctx, const fb::Sync& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "synchronize", "sync reply tag {} is outside the fetch range", op.reply_tag());
  }
  // Everything issued before the sync, on every stream, has run; the errors are
  // reported (the master raises them now), so the streams start clean.
  Session& session = ctx.session();
  if (!session.drain_streams()) {
    THD_THROW(TimeoutError, "synchronize",
              "the streams of node {} did not finish their work: they finished no op in {} ms", ctx.node(),
              ctx.timeout().count());
  }
  session.streams().for_each_context([](ExecContext& c) { c.clear_errors(); });
  // ... and the GPU work they queued has finished: an asynchronous CUDA error it hit
  // is raised now (reported before the SyncDone, which still goes: the master must
  // not wait out its timeout).
  session.streams().for_each_context([&](ExecContext& c) {
    try {
      c.gpu().synchronize();
    } catch (const Error& e) {
      report_failure(session, Poison{ctx.op_id(), "synchronize", "", ctx.node(), error_kind_of(e)}, e.what(),
                     error_kind_of(e));
    }
  });
  if (StreamCheck* check = session.check()) check->checker().on_synchronize();
  flatbuffers::FlatBufferBuilder b(64);
  auto body = fb::CreateSyncDone(b, op.sync_id(), ctx.table().size(), ctx.replies_sent());
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::SyncDone, body.Union()));
  protocol::send_message(ctx.channel(), 0, op.reply_tag(), {b.GetBufferPointer(), b.GetSize()}, ctx.timeout());
}

void run(ExecContext& ctx, const fb::ManualSeed& op) { ctx.session().seed_all(op.seed()); }

uint64_t erase_tensors(Session& session, std::span<const uint64_t> ids) {
  HandleTable& table = session.table();
  uint64_t unknown = 0;
  for (uint64_t id : ids) {
    // A GPU tensor's kernels may still run on any of the node's CUDA streams (its
    // ops returned once they were queued): its memory is reused once they are done.
    Tensor freed;  // its memory goes when this does, after the uses are recorded
    if (!table.take(id, freed)) {
      if (unknown == 0) unknown = id;
      continue;
    }
    if (freed.defined() && freed.device().is_cuda()) GpuStreams::record_uses(freed);
  }
  return unknown;
}

void report_failure(Session& session, const Poison& op, const std::string& message, ErrorKind kind) {
  flatbuffers::FlatBufferBuilder b(256);
  auto body =
      fb::CreateOpFailed(b, op.op_id, b.CreateString(op.op_name), b.CreateString(message), protocol::to_fb(kind),
                         op.graph, op.replay);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::OpFailed, body.Union()));
  session.reply({b.GetBufferPointer(), b.GetSize()});
}

}  // namespace thd::worker
