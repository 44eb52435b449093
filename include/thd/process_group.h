// Process-group (SPMD) mode: every process of the job runs the same program and
// talks to the others through the default group, as torch.distributed does.
//
//   thd::init_process_group({.backend = "tcp"});        // env:// by default
//   thd::Tensor t = thd::Tensor::full({4}, thd::get_rank());
//   thd::all_reduce(t);                                  // sum over every rank
//   thd::destroy_process_group();
#pragma once

#include <chrono>
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
std::string get_backend();
// A subgroup of the default group (ranks of the world); see DataChannel::new_group.
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks);

// The default group's operations as free functions.
void send(const Tensor& tensor, int dst, const P2POptions& options = {});
int recv(Tensor& tensor, int src = kAnySource, const P2POptions& options = {});
Request isend(const Tensor& tensor, int dst, const P2POptions& options = {});
Request irecv(Tensor& tensor, int src = kAnySource, const P2POptions& options = {});

void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
void broadcast(Tensor& tensor, int root, const CollectiveOptions& options = {});
void reduce(Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
void all_gather(Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
void reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                    const CollectiveOptions& options = {});
void gather(Tensor& output, const Tensor& input, int root, const CollectiveOptions& options = {});
void scatter(Tensor& output, const Tensor& input, int root, const CollectiveOptions& options = {});
void all_to_all(Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
void barrier(const CollectiveOptions& options = {});

// Async forms.
Request iall_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
Request ibroadcast(Tensor& tensor, int root, const CollectiveOptions& options = {});

}  // namespace thd
