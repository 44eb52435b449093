// Master-worker mode: one program (the master) drives tensors that live on worker
// processes (nodes 0..N-1) with ordinary tensor code (docs/master-worker.md).
//
//   thd::init_master_worker({.backend = "tcp"});     // rank 0 returns; other ranks serve
//   auto x = thd::DistributedFloatTensor({20, 20}).fill_(4);   // on node 0
//   auto y = thd::Tensor::randn({20, 20}).dist_send();          // upload to node 0
//   auto z = x + y;                                             // async: returns at once
//   thd::Tensor local = z.get();                                // a sync point
//   thd::shutdown();
//
// A DistributedTensor is a handle (id, node, device, dtype, shape, strides); copies
// share the remote tensor, which is freed when the last handle goes. Ops return at
// once: the master checks shapes and dtypes (bad calls throw at the call site) and
// queues a command for the node. Errors that happen on a worker come back as
// thd::RemoteError at the next sync point that depends on them; a worker that dies
// turns every operation on its node into thd::WorkerLost.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <thd/config.h>
#include <thd/datachannel.h>
#include <thd/tensor.h>

namespace thd {

struct MasterWorkerOptions {
  // The DataChannel backend commands, replies and tensors travel over ("tcp",
  // "mpi", "ucx", "libfabric"). Empty: $THD_BACKEND (thdrun --backend sets it),
  // else "tcp".
  std::string backend = "";
  // env:// (thdrun), tcp://host:port (a worker pool, or rank/world size given),
  // file:///path, as thd::rendezvous.
  std::string init_method = "env://";
  int world_size = -1;  // master + workers
  int rank = -1;
  // Rendezvous; and how long a wait for a worker (flow control, get, synchronize)
  // goes on while the worker makes no progress: one that keeps finishing ops is
  // waited for however long its queue is.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  std::optional<std::string> token = std::nullopt;
  std::string bind_host = "127.0.0.1";
  // Flow control: commands and upload bytes in flight per node before the master
  // blocks until the worker catches up.
  int64_t max_ops_in_flight = 1 << 16;
  int64_t max_bytes_in_flight = int64_t{256} << 20;
  // A node's command buffer is sent when it passes this size, when a result is
  // needed, or after it sat idle for flush_after.
  int64_t batch_bytes = 64 << 10;
  std::chrono::microseconds flush_after{200};
  // Streams (thd::Stream::create) alive at once per node; each one runs on a thread
  // of its own on its node. At most 4096.
  int max_streams_per_node = 256;
};

// The value of `--backend NAME` or `--backend=NAME` among a program's arguments, ""
// when there is none: `mpirun -n 4 prog --backend mpi` with
// init_master_worker({.backend = thd::backend_from_args(argc, argv)}).
std::string backend_from_args(int argc, const char* const* argv);

// Joins the job. Rank 0 returns as the master. In an SPMD launch (thdrun, mpirun)
// every other rank serves as worker node rank-1 and exits the process when the
// master shuts down; it never returns. Attaching to a worker pool
// (init_method = "tcp://host:port" of `thdrun --pool`), the caller is the master.
void init_master_worker(const MasterWorkerOptions& options = {});
// True on the master between init_master_worker() and shutdown().
bool is_master();
// The DataChannel backend of the session: the one MasterWorkerOptions::backend
// named, else $THD_BACKEND (thdrun --backend), else "tcp". ValueError unless
// initialized.
std::string backend_name();
// Waits for every node, ends the session (workers free everything; SPMD workers
// exit) and raises the first unreported remote error, if any. Safe to call twice.
void shutdown();
// The number of worker nodes.
int num_nodes();
// Waits until every op issued so far has run on every node; raises the first
// remote error not yet raised (thd::RemoteError) or thd::WorkerLost.
void synchronize();
// Seeds the random generators of every node: node k draws from (seed, k), so a
// program is reproducible per seed and node.
void manual_seed_all(uint64_t seed);

// The node new tensors go to on this thread (0 unless a NodeScope says otherwise).
int current_node();
// The device new tensors go to on this thread, on whatever node they go to (the CPU
// unless a DeviceScope says otherwise).
Device current_device();

// `with torch.distributed.node(i):` — tensors made in the scope live on node i.
// RAII, nestable, per thread.
class NodeScope {
 public:
  explicit NodeScope(int node);
  ~NodeScope();
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

 private:
  int previous_;
};

// `with torch.device("cuda:1"):` — tensors made in the scope (creations, uploads)
// live on `device` of their node: Device::cuda(i) is GPU i of whichever node the
// tensor goes to, and that node's worker refuses a GPU it does not have (a
// RemoteError naming the node, the device and the GPUs it has). Results of ops stay
// on their operands' device whatever the scope. RAII, nestable, per thread;
// ValueError for a negative GPU index.
class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

namespace master {
struct Handle;
}

class DistributedTensor {
 public:
  // An undefined handle: every op on it throws.
  DistributedTensor() = default;
  // An uninitialized tensor on the current node and device (torch.empty), or on
  // `device` of the current node.
  explicit DistributedTensor(const Shape& shape, DType dtype = kFloat32);
  DistributedTensor(const Shape& shape, DType dtype, Device device);

  // ---- metadata (known on the master: no round trip) -----------------------------
  bool defined() const { return handle_ != nullptr; }
  int node() const;
  // The device of its node the tensor lives on (cuda:i: that node's GPU i).
  Device device() const;
  bool is_cuda() const { return device().is_cuda(); }
  DType dtype() const;
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  const Shape& strides() const;
  int64_t dim() const;
  int64_t size(int64_t dim) const;
  int64_t numel() const;
  size_t element_size() const;
  size_t nbytes() const;
  bool is_contiguous() const;
  // The id of the remote tensor in this session.
  uint64_t id() const;

  // ---- moving data (get and item are sync points) -----------------------------------
  // Downloads the tensor (contiguous) to the master's host memory, from any device
  // (a GPU tensor is copied to its worker's host memory first).
  Tensor get() const;
  template <typename T>
  T item() const {
    return get().item<T>();
  }
  Scalar item() const { return get().item(); }
  // A copy on node k, sent straight from this tensor's worker to node k's (this
  // tensor itself when it is already on node k, as torch's .to()). It lands on the
  // same device of node k (cuda:1 on cuda:1); a GPU tensor travels through host
  // memory on both workers.
  DistributedTensor to_node(int node) const;
  // Uploads a local tensor (from the master's host memory; a CUDA tensor is copied
  // there first) to `device` (default: the current device) of `node` (default: the
  // current node). The bytes land in the worker's host memory, which copies them to
  // a GPU device.
  static DistributedTensor from(const Tensor& local, std::optional<int> node = std::nullopt,
                                std::optional<Device> device = std::nullopt);
  // Device moves within the node: a copy on `device` (this tensor itself when it is
  // already there, unless copy), made by its worker. cuda(i) is the node's GPU i.
  DistributedTensor cuda(int index = 0) const;
  DistributedTensor cpu() const;
  DistributedTensor to(Device device, bool copy = false) const;

  // ---- creation on the current node, and on `device` (default: the current device) ----
  static DistributedTensor empty(const Shape& shape, DType dtype = kFloat32,
                                 std::optional<Device> device = std::nullopt);
  static DistributedTensor zeros(const Shape& shape, DType dtype = kFloat32,
                                 std::optional<Device> device = std::nullopt);
  static DistributedTensor ones(const Shape& shape, DType dtype = kFloat32,
                                std::optional<Device> device = std::nullopt);
  static DistributedTensor full(const Shape& shape, Scalar value, DType dtype = kFloat32,
                                std::optional<Device> device = std::nullopt);
  static DistributedTensor arange(Scalar end, std::optional<DType> dtype = std::nullopt,
                                  std::optional<Device> device = std::nullopt);
  static DistributedTensor arange(Scalar start, Scalar end, Scalar step = 1,
                                  std::optional<DType> dtype = std::nullopt,
                                  std::optional<Device> device = std::nullopt);
  static DistributedTensor linspace(Scalar start, Scalar end, int64_t steps, DType dtype = kFloat32,
                                    std::optional<Device> device = std::nullopt);
  static DistributedTensor eye(int64_t n, int64_t m = -1, DType dtype = kFloat32,
                               std::optional<Device> device = std::nullopt);
  // Random draws come from the node's generator, the same on every device: a GPU
  // tensor holds the values the CPU one would for the same seed.
  static DistributedTensor rand(const Shape& shape, DType dtype = kFloat32,
                                std::optional<Device> device = std::nullopt);
  static DistributedTensor randn(const Shape& shape, DType dtype = kFloat32,
                                 std::optional<Device> device = std::nullopt);
  static DistributedTensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64,
                                   std::optional<Device> device = std::nullopt);

  // ---- views (share the remote storage) ------------------------------------------------
  DistributedTensor view(const Shape& shape) const;
  DistributedTensor reshape(const Shape& shape) const;
  DistributedTensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  DistributedTensor transpose(int64_t dim0, int64_t dim1) const;
  DistributedTensor t() const;
  DistributedTensor permute(const Dims& dims) const;
  DistributedTensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  DistributedTensor narrow(int64_t dim, int64_t start, int64_t length) const;
  DistributedTensor select(int64_t dim, int64_t index) const;
  DistributedTensor expand(const Shape& shape) const;
  DistributedTensor expand_as(const DistributedTensor& other) const { return expand(other.shape()); }
  DistributedTensor squeeze() const;
  DistributedTensor squeeze(int64_t dim) const;
  DistributedTensor unsqueeze(int64_t dim) const;
  DistributedTensor contiguous() const;
  DistributedTensor clone() const;

  // ---- elementwise (thd::Tensor's semantics) ---------------------------------------------
  DistributedTensor add(const DistributedTensor& other) const;
  DistributedTensor add(Scalar other) const;
  DistributedTensor& add_(const DistributedTensor& other);
  DistributedTensor& add_(Scalar other);
  DistributedTensor sub(const DistributedTensor& other) const;
  DistributedTensor sub(Scalar other) const;
  DistributedTensor& sub_(const DistributedTensor& other);
  DistributedTensor& sub_(Scalar other);
  DistributedTensor mul(const DistributedTensor& other) const;
  DistributedTensor mul(Scalar other) const;
  DistributedTensor& mul_(const DistributedTensor& other);
  DistributedTensor& mul_(Scalar other);
  DistributedTensor div(const DistributedTensor& other) const;
  DistributedTensor div(Scalar other) const;
  DistributedTensor& div_(const DistributedTensor& other);
  DistributedTensor& div_(Scalar other);
  DistributedTensor pow(const DistributedTensor& exponent) const;
  DistributedTensor pow(Scalar exponent) const;
  DistributedTensor& pow_(const DistributedTensor& exponent);
  DistributedTensor& pow_(Scalar exponent);
  DistributedTensor maximum(const DistributedTensor& other) const;
  DistributedTensor minimum(const DistributedTensor& other) const;

  DistributedTensor neg() const;
  DistributedTensor& neg_();
  DistributedTensor abs() const;
  DistributedTensor& abs_();
  DistributedTensor exp() const;
  DistributedTensor& exp_();
  DistributedTensor log() const;
  DistributedTensor& log_();
  DistributedTensor sqrt() const;
  DistributedTensor& sqrt_();
  DistributedTensor rsqrt() const;
  DistributedTensor& rsqrt_();
  DistributedTensor sin() const;
  DistributedTensor& sin_();
  DistributedTensor cos() const;
  DistributedTensor& cos_();
  DistributedTensor tanh() const;
  DistributedTensor& tanh_();
  DistributedTensor sigmoid() const;
  DistributedTensor& sigmoid_();
  DistributedTensor relu() const;
  DistributedTensor& relu_();
  DistributedTensor gelu() const;
  DistributedTensor& gelu_();
  DistributedTensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  DistributedTensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);

  DistributedTensor eq(const DistributedTensor& other) const;
  DistributedTensor eq(Scalar other) const;
  DistributedTensor ne(const DistributedTensor& other) const;
  DistributedTensor ne(Scalar other) const;
  DistributedTensor lt(const DistributedTensor& other) const;
  DistributedTensor lt(Scalar other) const;
  DistributedTensor le(const DistributedTensor& other) const;
  DistributedTensor le(Scalar other) const;
  DistributedTensor gt(const DistributedTensor& other) const;
  DistributedTensor gt(Scalar other) const;
  DistributedTensor ge(const DistributedTensor& other) const;
  DistributedTensor ge(Scalar other) const;

  DistributedTensor to(DType dtype, bool copy = false) const;
  DistributedTensor& fill_(Scalar value);
  DistributedTensor& copy_(const DistributedTensor& src);

  // ---- reductions -------------------------------------------------------------------------
  DistributedTensor sum() const;
  DistributedTensor sum(const Dims& dims, bool keepdim = false) const;
  DistributedTensor mean() const;
  DistributedTensor mean(const Dims& dims, bool keepdim = false) const;
  DistributedTensor prod() const;
  DistributedTensor prod(const Dims& dims, bool keepdim = false) const;
  DistributedTensor max() const;
  DistributedTensor max(const Dims& dims, bool keepdim = false) const;
  DistributedTensor min() const;
  DistributedTensor min(const Dims& dims, bool keepdim = false) const;
  DistributedTensor argmax() const;
  DistributedTensor argmax(int64_t dim, bool keepdim = false) const;
  DistributedTensor argmin() const;
  DistributedTensor argmin(int64_t dim, bool keepdim = false) const;
  DistributedTensor norm(double p = 2.0) const;
  DistributedTensor norm(double p, const Dims& dims, bool keepdim = false) const;
  DistributedTensor var() const;
  DistributedTensor var(const Dims& dims, int64_t correction = 1, bool keepdim = false) const;
  DistributedTensor std() const;
  DistributedTensor std(const Dims& dims, int64_t correction = 1, bool keepdim = false) const;
  DistributedTensor any() const;
  DistributedTensor any(const Dims& dims, bool keepdim = false) const;
  DistributedTensor all() const;
  DistributedTensor all(const Dims& dims, bool keepdim = false) const;
  DistributedTensor softmax(int64_t dim) const;
  DistributedTensor log_softmax(int64_t dim) const;

  // ---- linear algebra ------------------------------------------------------------------
  DistributedTensor matmul(const DistributedTensor& other) const;
  DistributedTensor mm(const DistributedTensor& other) const;
  DistributedTensor bmm(const DistributedTensor& other) const;
  DistributedTensor addmm(const DistributedTensor& mat1, const DistributedTensor& mat2, Scalar beta = 1,
                          Scalar alpha = 1) const;
  DistributedTensor dot(const DistributedTensor& other) const;
  DistributedTensor outer(const DistributedTensor& other) const;

  // ---- indexing, joining, sorting ---------------------------------------------------------
  DistributedTensor index_select(int64_t dim, const DistributedTensor& index) const;
  DistributedTensor gather(int64_t dim, const DistributedTensor& index) const;
  DistributedTensor scatter(int64_t dim, const DistributedTensor& index, const DistributedTensor& src) const;
  DistributedTensor scatter(int64_t dim, const DistributedTensor& index, Scalar value) const;
  DistributedTensor& scatter_(int64_t dim, const DistributedTensor& index, const DistributedTensor& src);
  DistributedTensor& scatter_(int64_t dim, const DistributedTensor& index, Scalar value);
  DistributedTensor masked_fill(const DistributedTensor& mask, Scalar value) const;
  DistributedTensor& masked_fill_(const DistributedTensor& mask, Scalar value);
  std::vector<DistributedTensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<DistributedTensor> split(const std::vector<int64_t>& sizes, int64_t dim = 0) const;
  std::vector<DistributedTensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::pair<DistributedTensor, DistributedTensor> sort(int64_t dim = -1, bool descending = false) const;
  std::pair<DistributedTensor, DistributedTensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                                       bool sorted = true) const;

  // "DistributedTensor(node=1, device=cpu, dtype=float32, shape=[2, 3], id=7)"
  std::string str() const;

  // For the runtime.
  explicit DistributedTensor(std::shared_ptr<master::Handle> handle) : handle_(std::move(handle)) {}
  const std::shared_ptr<master::Handle>& handle() const { return handle_; }

 private:
  std::shared_ptr<master::Handle> handle_;
};

// THD's typed tensors: DistributedFloatTensor({20, 20}) is a float32 tensor on the
// current node.
template <DType D>
class TypedDistributedTensor : public DistributedTensor {
 public:
  explicit TypedDistributedTensor(const Shape& shape) : DistributedTensor(shape, D) {}
  TypedDistributedTensor(const Shape& shape, Device device) : DistributedTensor(shape, D, device) {}
};
using DistributedFloatTensor = TypedDistributedTensor<kFloat32>;
using DistributedDoubleTensor = TypedDistributedTensor<kFloat64>;
using DistributedHalfTensor = TypedDistributedTensor<kFloat16>;
using DistributedBFloat16Tensor = TypedDistributedTensor<kBFloat16>;
using DistributedLongTensor = TypedDistributedTensor<kInt64>;
using DistributedIntTensor = TypedDistributedTensor<kInt32>;
using DistributedCharTensor = TypedDistributedTensor<kInt8>;
using DistributedByteTensor = TypedDistributedTensor<kUInt8>;
using DistributedBoolTensor = TypedDistributedTensor<kBool>;

// Free forms; every tensor must be on one node.
DistributedTensor cat(const std::vector<DistributedTensor>& tensors, int64_t dim = 0);
DistributedTensor stack(const std::vector<DistributedTensor>& tensors, int64_t dim = 0);
DistributedTensor where(const DistributedTensor& cond, const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor where(const DistributedTensor& cond, Scalar a, Scalar b);
DistributedTensor matmul(const DistributedTensor& a, const DistributedTensor& b);

DistributedTensor operator+(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor operator-(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor operator*(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor operator/(const DistributedTensor& a, const DistributedTensor& b);
DistributedTensor operator+(const DistributedTensor& a, Scalar b);
DistributedTensor operator-(const DistributedTensor& a, Scalar b);
DistributedTensor operator*(const DistributedTensor& a, Scalar b);
DistributedTensor operator/(const DistributedTensor& a, Scalar b);
DistributedTensor operator+(Scalar a, const DistributedTensor& b);
DistributedTensor operator-(Scalar a, const DistributedTensor& b);
DistributedTensor operator*(Scalar a, const DistributedTensor& b);
DistributedTensor operator/(Scalar a, const DistributedTensor& b);
DistributedTensor operator-(const DistributedTensor& a);
DistributedTensor& operator+=(DistributedTensor& a, const DistributedTensor& b);
DistributedTensor& operator-=(DistributedTensor& a, const DistributedTensor& b);
DistributedTensor& operator*=(DistributedTensor& a, const DistributedTensor& b);
DistributedTensor& operator/=(DistributedTensor& a, const DistributedTensor& b);
DistributedTensor& operator+=(DistributedTensor& a, Scalar b);
DistributedTensor& operator-=(DistributedTensor& a, Scalar b);
DistributedTensor& operator*=(DistributedTensor& a, Scalar b);
DistributedTensor& operator/=(DistributedTensor& a, Scalar b);
std::ostream& operator<<(std::ostream& os, const DistributedTensor& t);

// ---- collectives issued by the master -----------------------------------------------------
// The tensors live on distinct nodes (one per node taking part) and agree in dtype
// and shape. The master sends one command per node; the workers run the
// DataChannel's collective among themselves; no tensor byte passes the master.
// The in-place forms write the remote tensors the handles share, so they take
// the handles by const reference: thd::all_reduce({g0, g1, g2}) works on g0..g2.
// In place: every tensor ends up as the op over all of them.
void all_reduce(const std::vector<DistributedTensor>& tensors, ReduceOp op = ReduceOp::Sum);
// tensors[root_index] is copied into every other tensor.
void broadcast(const std::vector<DistributedTensor>& tensors, size_t root_index);
// tensors[root_index] ends up as the op over all of them; the others are unchanged.
void reduce(const std::vector<DistributedTensor>& tensors, size_t root_index, ReduceOp op = ReduceOp::Sum);
// One output per input, on its node, of shape [n, *input.shape()]: every input in order.
std::vector<DistributedTensor> all_gather(const std::vector<DistributedTensor>& inputs);
// Inputs of shape [n * k, ...]; output i (on input i's node) is [k, ...], the op
// over every input's block i.
std::vector<DistributedTensor> reduce_scatter(const std::vector<DistributedTensor>& inputs,
                                              ReduceOp op = ReduceOp::Sum);

// What a node is doing and holding (thd::stats()).
struct StreamStats {
  uint32_t stream = 0;      // 0: the node's default stream
  // Issued to it and not yet run. A snapshot: an event record whose event has
  // already fired (synchronize returned) counts until its task returns, a moment
  // later.
  uint64_t queued_ops = 0;
};
struct NodeStats {
  int node = -1;
  std::string backend;               // the session's DataChannel backend (thd::backend_name())
  uint64_t ops_executed = 0;         // ops run (or poisoned without running) this session
  std::vector<StreamStats> streams;  // the default stream first (its ops run as they arrive: never queued)
  // Handed to the node's DataChannel: commands, replies, copies and collectives.
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  int64_t memory_in_use = 0;  // tensor memory the worker process holds now (host)
  int64_t memory_peak = 0;    // the most it held at once this session
  uint64_t live_tensors = 0;
  uint64_t live_events = 0;
  int cuda_devices = 0;  // the GPUs the worker can use (Device::cuda(0..n-1) on this node)
  // One per GPU: tensor memory on it now and the most at once this session.
  struct DeviceMemory {
    int index = 0;
    int64_t in_use = 0;
    int64_t peak = 0;
  };
  std::vector<DeviceMemory> devices;
};
// Every node's statistics: one round trip per node, not a sync point (what is still
// queued counts as queued). WorkerLost for a lost node.
std::vector<NodeStats> stats();

namespace detail {
// For tests: the number of live tensors in each node's handle table, after a
// synchronize().
std::vector<uint64_t> live_tensors_per_node();
#if THD_ENABLE_TEST_HOOKS
// Test support, in builds with the test hooks (workers run with THD_TEST_HOOKS=1):
// an op on the current node's current stream that opens latch `key`, or that waits
// until it is opened (at most `timeout`; then it fails with a TimeoutError like any op).
void test_latch_open(uint64_t key);
void test_latch_wait(uint64_t key, std::chrono::milliseconds timeout);
#endif
}  // namespace detail

}  // namespace thd
