// Process-group (SPMD) mode: every process of the job runs the same program and
// talks to the others through process groups, as torch.distributed does.
//
//   thd::init_process_group();                           // env://, $THD_BACKEND or tcp
//   thd::Tensor t = thd::Tensor::full({4}, thd::get_rank());
//   thd::all_reduce(t);                                  // sum over every rank
//   auto evens = thd::new_group({0, 2});
//   if (evens->is_member()) thd::broadcast(t, /*src=*/2, evens);   // src: a global rank
//   thd::Work w = thd::iall_reduce(t);                   // torch's async_op=True
//   w.wait();
//   thd::destroy_process_group();
//
// The free functions follow torch.distributed's (docs/datachannel.md, "Porting
// from torch.distributed", has them side by side):
// - `group`: the group the call runs on; null (the default) is the default group.
//   Every member of the group makes the call; a rank outside it gets a ValueError
//   (torch only warns and returns).
// - src/dst/peers are GLOBAL ranks (ranks of the default group), as in torch;
//   get_group_rank/get_global_rank convert. A rank that is not in the group: a
//   ValueError naming it. recv returns the sender's global rank.
// - Every collective has an async form, i + its name, returning a Work (a
//   thd::Request: wait(), is_completed(), exception()); the blocking form is the
//   async one waited for. Buffers belong to the operation until it completes.
// - The list forms (all_gather(tensor_list, tensor), gather(tensor, gather_list,
//   dst), ...) take host tensors; a wrong list length, dtype or size fails with a
//   ValueError naming the list and the position, before anything is sent.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <thd/datachannel.h>

namespace thd {

struct ProcessGroupOptions {
  // "tcp", "mpi", "ucx", "libfabric", "nccl". Empty: $THD_BACKEND (thdrun
  // --backend sets it), else "tcp", as init_master_worker.
  std::string backend = "";
  // env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), tcp://host:port or
  // file:///path, as thd::rendezvous.
  std::string init_method = "env://";
  int world_size = -1;
  int rank = -1;
  // Rendezvous and the default deadline of every operation.
  std::chrono::milliseconds timeout = kDefaultDataChannelTimeout;
  std::optional<std::string> token = std::nullopt;
  std::string bind_host = "127.0.0.1";
};

// A group argument: null means the default group (torch's group=None).
using Group = std::shared_ptr<ProcessGroup>;

// Joins the job. Error (ValueError) when already initialized; the rendezvous and
// backend errors otherwise.
void init_process_group(const ProcessGroupOptions& options = {});
bool is_initialized();
// Leaves the job: the default group and every group made from it are closed.
// Groups still referenced elsewhere fail their later operations.
void destroy_process_group();

// The default group (all ranks). ValueError unless initialized.
std::shared_ptr<ProcessGroup> default_group();
int get_rank();
int get_world_size();
// This process's rank in `group` (-1 when it is not a member, as torch) and the
// group's size.
int get_rank(const Group& group);
int get_world_size(const Group& group);
std::string get_backend();
// A subgroup of the default group (ranks of the world); see DataChannel::new_group.
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks);
// Global rank -> rank in `group`, and back (torch's names). ValueError for a
// global rank that is not a member, or a group rank out of range.
int get_group_rank(const Group& group, int global_rank);
int get_global_rank(const Group& group, int group_rank);

// ---- point to point (dst/src: global ranks) --------------------------------------------
void send(const Tensor& tensor, int dst, const Group& group = nullptr, const P2POptions& options = {});
// Returns the global rank the message came from (useful with kAnySource).
int recv(Tensor& tensor, int src = kAnySource, const Group& group = nullptr, const P2POptions& options = {});
Work isend(const Tensor& tensor, int dst, const Group& group = nullptr, const P2POptions& options = {});
// Work::source() is the sender's rank in `group` (its global rank on the default group).
Work irecv(Tensor& tensor, int src = kAnySource, const Group& group = nullptr, const P2POptions& options = {});

// ---- collectives (src/dst: global ranks) -------------------------------------------------
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const Group& group = nullptr,
                const CollectiveOptions& options = {});
void broadcast(Tensor& tensor, int src, const Group& group = nullptr, const CollectiveOptions& options = {});
void reduce(Tensor& tensor, int dst, ReduceOp op = ReduceOp::Sum, const Group& group = nullptr,
            const CollectiveOptions& options = {});
void barrier(const Group& group = nullptr, const CollectiveOptions& options = {});

// Flat forms: one tensor holds every rank's block, in group-rank order.
// output has group size x input.numel() elements (torch's all_gather_into_tensor).
void all_gather(Tensor& output, const Tensor& input, const Group& group = nullptr,
                const CollectiveOptions& options = {});
void all_gather_into_tensor(Tensor& output, const Tensor& input, const Group& group = nullptr,
                            const CollectiveOptions& options = {});
// input holds group-size blocks of output's size (torch's reduce_scatter_tensor).
void reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum, const Group& group = nullptr,
                    const CollectiveOptions& options = {});
void reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                           const Group& group = nullptr, const CollectiveOptions& options = {});
// Only dst's output is written (others may pass an undefined one).
void gather(Tensor& output, const Tensor& input, int dst, const Group& group = nullptr,
            const CollectiveOptions& options = {});
// Only src's input is read (others may pass an undefined one).
void scatter(Tensor& output, const Tensor& input, int src, const Group& group = nullptr,
             const CollectiveOptions& options = {});
// Block j of the input goes to group rank j, which stores it as its block of this rank.
void all_to_all(Tensor& output, const Tensor& input, const Group& group = nullptr,
                const CollectiveOptions& options = {});

// List forms (torch's signatures). tensor_list[i] receives group rank i's tensor;
// sizes may differ between ranks.
void all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor, const Group& group = nullptr,
                const CollectiveOptions& options = {});
// gather_list (on dst: one per rank, each of tensor's size; empty elsewhere).
void gather(const Tensor& tensor, const std::vector<Tensor>& gather_list, int dst, const Group& group = nullptr,
            const CollectiveOptions& options = {});
// scatter_list (on src: one per rank, each of tensor's size; empty elsewhere).
void scatter(Tensor& tensor, const std::vector<Tensor>& scatter_list, int src, const Group& group = nullptr,
             const CollectiveOptions& options = {});
// input_list: one per rank, each of output's size; output = the op over every
// rank's input_list[this rank].
void reduce_scatter(Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op = ReduceOp::Sum,
                    const Group& group = nullptr, const CollectiveOptions& options = {});
// input_tensor_list[j] goes to group rank j, which receives it as its
// output_tensor_list[this rank]; sizes may differ.
void all_to_all(const std::vector<Tensor>& output_tensor_list, const std::vector<Tensor>& input_tensor_list,
                const Group& group = nullptr, const CollectiveOptions& options = {});
// Rows (dim 0) of input, split by input_split_sizes, go to the group ranks in
// order; output's rows, split by output_split_sizes, come from them. An empty
// split list: equal parts.
void all_to_all_single(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_split_sizes = {},
                       const std::vector<int64_t>& input_split_sizes = {}, const Group& group = nullptr,
                       const CollectiveOptions& options = {});

// ---- async forms (torch's async_op=True): the same arguments, a Work back -------------------
Work iall_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const Group& group = nullptr,
                 const CollectiveOptions& options = {});
Work ibroadcast(Tensor& tensor, int src, const Group& group = nullptr, const CollectiveOptions& options = {});
Work ireduce(Tensor& tensor, int dst, ReduceOp op = ReduceOp::Sum, const Group& group = nullptr,
             const CollectiveOptions& options = {});
Work ibarrier(const Group& group = nullptr, const CollectiveOptions& options = {});
Work iall_gather(Tensor& output, const Tensor& input, const Group& group = nullptr,
                 const CollectiveOptions& options = {});
Work iall_gather_into_tensor(Tensor& output, const Tensor& input, const Group& group = nullptr,
                             const CollectiveOptions& options = {});
Work ireduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum, const Group& group = nullptr,
                     const CollectiveOptions& options = {});
Work ireduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                            const Group& group = nullptr, const CollectiveOptions& options = {});
Work igather(Tensor& output, const Tensor& input, int dst, const Group& group = nullptr,
             const CollectiveOptions& options = {});
Work iscatter(Tensor& output, const Tensor& input, int src, const Group& group = nullptr,
              const CollectiveOptions& options = {});
Work iall_to_all(Tensor& output, const Tensor& input, const Group& group = nullptr,
                 const CollectiveOptions& options = {});
Work iall_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor, const Group& group = nullptr,
                 const CollectiveOptions& options = {});
Work igather(const Tensor& tensor, const std::vector<Tensor>& gather_list, int dst, const Group& group = nullptr,
             const CollectiveOptions& options = {});
Work iscatter(Tensor& tensor, const std::vector<Tensor>& scatter_list, int src, const Group& group = nullptr,
              const CollectiveOptions& options = {});
Work ireduce_scatter(Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op = ReduceOp::Sum,
                     const Group& group = nullptr, const CollectiveOptions& options = {});
Work iall_to_all(const std::vector<Tensor>& output_tensor_list, const std::vector<Tensor>& input_tensor_list,
                 const Group& group = nullptr, const CollectiveOptions& options = {});
Work iall_to_all_single(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_split_sizes = {},
                        const std::vector<int64_t>& input_split_sizes = {}, const Group& group = nullptr,
                        const CollectiveOptions& options = {});

}  // namespace thd
