// Collectives issued by the master (thd.all_reduce over tensors on several nodes)
// and thd.stats(): the master sends one command per node and the workers run the
// collective among themselves. Each call may wait under flow control, so it
// releases the GIL.
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include <thd/distributed.h>

#include "bindings.h"

namespace thd::python {

namespace {

using DT = DistributedTensor;
using Tensors = std::vector<DT>;

void bind_reduce_op(py::module_& m) {
  // torch.distributed's names (ReduceOp.SUM, ...) for thd::ReduceOp.
  py::enum_<ReduceOp>(m, "ReduceOp", "How a reduction combines values: torch.distributed.ReduceOp's names.")
      .value("SUM", ReduceOp::Sum)
      .value("PRODUCT", ReduceOp::Prod)
      .value("MIN", ReduceOp::Min)
      .value("MAX", ReduceOp::Max)
      .value("AVG", ReduceOp::Avg, "floating-point dtypes only")
      .value("BAND", ReduceOp::BAnd, "integer and bool dtypes only")
      .value("BOR", ReduceOp::BOr)
      .value("BXOR", ReduceOp::BXor);
}

// A root index from Python: a negative one is an IndexError that says so, not a
// conversion failure listing the overloads.
size_t root_of(int64_t root_index, const char* op) {
  if (root_index < 0) {
    ErrorContext context;
    context.op = op;
    throw IndexError("root index " + std::to_string(root_index) + " is negative: the tensors are indexed from 0",
                     context);
  }
  return static_cast<size_t>(root_index);
}

void bind_master_collectives(py::module_& m) {
  m.def("all_reduce", [](const Tensors& t, ReduceOp op) { all_reduce(t, op); }, py::arg("tensors"),
        py::arg("op") = ReduceOp::Sum, Release(),
        R"doc(all_reduce(tensors, op=ReduceOp.SUM): in place, every tensor becomes the op over all of them.

The tensors live on distinct nodes (one per node taking part) and agree in dtype
and shape; the workers run the collective among themselves and no byte passes the
master. Asynchronous like any op: the results are there at the next sync point.
float16 and bfloat16 sums accumulate in float32 and are rounded once.)doc");
  m.def("broadcast", [](const Tensors& t, int64_t root_index) { broadcast(t, root_of(root_index, "broadcast")); },
        py::arg("tensors"),
        py::arg("root_index"), Release(),
        "broadcast(tensors, root_index): tensors[root_index] is copied into every other tensor, in place.");
  m.def("reduce",
        [](const Tensors& t, int64_t root_index, ReduceOp op) { reduce(t, root_of(root_index, "reduce"), op); },
        py::arg("tensors"), py::arg("root_index"), py::arg("op") = ReduceOp::Sum, Release(),
        "reduce(tensors, root_index, op=ReduceOp.SUM): tensors[root_index] becomes the op over all of them; the "
        "others are unchanged.");
  m.def("all_gather", [](const Tensors& inputs) { return all_gather(inputs); }, py::arg("inputs"), Release(),
        "all_gather(inputs) -> list: one output per input, on its node, of shape [n, *input.shape]: every input "
        "in order.");
  m.def("reduce_scatter", [](const Tensors& inputs, ReduceOp op) { return reduce_scatter(inputs, op); },
        py::arg("inputs"), py::arg("op") = ReduceOp::Sum, Release(),
        "reduce_scatter(inputs, op=ReduceOp.SUM) -> list: inputs of shape [n * k, ...]; output i, on input i's "
        "node, is [k, ...], the op over every input's block i.");
}

// One node's statistics as a dict (thd::NodeStats's fields by name).
py::dict node_stats(const NodeStats& s) {
  py::list streams;
  for (const StreamStats& st : s.streams) {
    py::dict d;
    d["stream"] = st.stream;
    d["queued_ops"] = st.queued_ops;
    streams.append(std::move(d));
  }
  py::list devices;
  for (const NodeStats::DeviceMemory& dev : s.devices) {
    py::dict d;
    d["index"] = dev.index;
    d["in_use"] = dev.in_use;
    d["peak"] = dev.peak;
    devices.append(std::move(d));
  }
  py::dict d;
  d["node"] = s.node;
  d["backend"] = s.backend;
  d["ops_executed"] = s.ops_executed;
  d["streams"] = std::move(streams);
  d["bytes_sent"] = s.bytes_sent;
  d["bytes_received"] = s.bytes_received;
  d["messages_sent"] = s.messages_sent;
  d["messages_received"] = s.messages_received;
  d["memory_in_use"] = s.memory_in_use;
  d["memory_peak"] = s.memory_peak;
  d["live_tensors"] = s.live_tensors;
  d["live_events"] = s.live_events;
  d["cuda_devices"] = s.cuda_devices;
  d["devices"] = std::move(devices);
  return d;
}

void bind_stats(py::module_& m) {
  m.def("stats",
        [] {
          std::vector<NodeStats> all;
          {
            py::gil_scoped_release release;
            all = stats();
          }
          py::list out;
          for (const NodeStats& s : all) out.append(node_stats(s));
          return out;
        },
        R"doc(stats() -> list of dict: every node's statistics, one round trip per node.

Not a sync point (what is still queued counts as queued). Keys: node, backend,
ops_executed, streams ([{stream, queued_ops}]), bytes_sent, bytes_received,
messages_sent, messages_received, memory_in_use, memory_peak, live_tensors,
live_events, cuda_devices, devices ([{index, in_use, peak}]). thd.WorkerLost for a
lost node.)doc");
  m.def("backend_name", &backend_name, "The DataChannel backend of the master-worker session (\"tcp\", ...).");
}

}  // namespace

void bind_collectives(py::module_& m) {
  bind_reduce_op(m);
  bind_master_collectives(m);
  bind_stats(m);
}

}  // namespace thd::python
