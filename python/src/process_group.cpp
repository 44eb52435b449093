// Process-group (SPMD) mode: thd's C++ process-group API (include/thd/process_group.h)
// as private functions of thd._C; python/thd/_process_group.py gives them
// torch.distributed's public names and signatures, and dispatches the names that
// master-worker mode shares (all_reduce, ...).
//
// Every collective is issued in its async form and, unless async_op, waited for
// here: the blocking form is the async one waited for (process_group.h). Every
// call that can wait releases the GIL; the tensors are the callers' thd.Tensor
// objects, which the operation fills in place.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include <thd/object_collectives.h>
#include <thd/process_group.h>

#include "bindings.h"

namespace thd::python {

namespace {

using Tensors = std::vector<Tensor>;
using Bytes = std::vector<uint8_t>;

// A year bounds the conversion to milliseconds (inf would overflow it).
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;

std::chrono::milliseconds to_ms(double seconds, const char* op) {
  if (!(seconds > 0) || seconds > kMaxTimeoutS) {
    throw ValueError(std::string(op) + ": timeout must be positive and at most a year, got " +
                         std::to_string(seconds) + " s",
                     ErrorContext{.op = op});
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

// group=None is the default group (a null Group); anything else must be one
// thd.new_group() made.
Group group_from(const py::object& group, const char* op) {
  if (group.is_none()) return nullptr;
  if (!py::isinstance<ProcessGroup>(group)) {
    throw TypeError(std::string(op) + ": group is None or a thd.ProcessGroup (thd.new_group makes one), got " +
                        std::string(py::str(py::type::of(group).attr("__name__"))),
                    ErrorContext{.op = op});
  }
  return group.cast<std::shared_ptr<ProcessGroup>>();
}

// The Work of an async_op=True call, or None once a blocking one has completed.
py::object finish(Work work, bool async_op) {
  if (async_op) return py::cast(std::move(work));
  {
    py::gil_scoped_release release;
    work.wait();
  }
  return py::none();
}

// Issues `issue(group)` (returning a Work) without the GIL, then finishes it.
template <typename F>
py::object run(const py::object& group, bool async_op, const char* op, F&& issue) {
  const Group g = group_from(group, op);
  Work work;
  {
    py::gil_scoped_release release;
    work = issue(g);
  }
  return finish(std::move(work), async_op);
}

void bind_init(py::module_& m) {
  m.def(
      "_pg_init",
      [](const std::optional<std::string>& backend, const std::optional<std::string>& init_method, double timeout_s,
         std::optional<int> world_size, std::optional<int> rank, std::optional<std::string> token,
         std::optional<std::string> bind_host) {
        ProcessGroupOptions o;
        o.backend = backend.value_or("");
        if (init_method) o.init_method = *init_method;
        o.timeout = to_ms(timeout_s, "init_process_group");
        o.world_size = world_size.value_or(-1);
        o.rank = rank.value_or(-1);
        o.token = std::move(token);
        if (bind_host) o.bind_host = *bind_host;
        py::gil_scoped_release release;
        init_process_group(o);
      });
  m.def("_pg_is_initialized", &is_initialized);
  m.def("_pg_destroy", &destroy_process_group, py::call_guard<py::gil_scoped_release>());
  m.def("_pg_available_backends", &DataChannel::available_backends);
  m.def("_pg_get_rank", [](const py::object& group) { return get_rank(group_from(group, "get_rank")); });
  m.def("_pg_get_world_size",
        [](const py::object& group) { return get_world_size(group_from(group, "get_world_size")); });
  m.def("_pg_get_backend", [](const py::object& group) {
    const Group g = group_from(group, "get_backend");
    return g ? g->backend() : get_backend();
  });
  m.def("_pg_get_group_rank", [](const py::object& group, int global_rank) {
    return get_group_rank(group_from(group, "get_group_rank"), global_rank);
  });
  m.def("_pg_get_global_rank", [](const py::object& group, int group_rank) {
    return get_global_rank(group_from(group, "get_global_rank"), group_rank);
  });
  m.def("_pg_new_group", [](std::vector<int> ranks, std::optional<double> timeout_s) {
    std::optional<std::chrono::milliseconds> timeout;
    if (timeout_s) timeout = to_ms(*timeout_s, "new_group");
    py::gil_scoped_release release;
    return default_group()->new_group(std::move(ranks), timeout);
  });
}

void bind_classes(py::module_& m) {
  py::class_<ProcessGroup, std::shared_ptr<ProcessGroup>>(
      m, "ProcessGroup",
      "A group of ranks of the job (torch.distributed's ProcessGroup); thd.new_group() makes one. Pass it as "
      "group= to a collective; every member makes the call.")
      .def("rank", &ProcessGroup::rank, "This process's rank in the group; -1 when it is not a member.")
      .def("size", &ProcessGroup::size, "The number of ranks in the group.")
      .def("name", &ProcessGroup::backend, "The group's backend (\"tcp\", \"mpi\", ...).")
      .def_property_readonly("ranks", &ProcessGroup::world_ranks,
                             "The members as global ranks, in group-rank order.")
      .def("__repr__", [](const ProcessGroup& g) {
        return "thd.ProcessGroup(ranks=" + std::string(py::str(py::cast(g.world_ranks()))) +
               ", rank=" + std::to_string(g.rank()) + ", backend=\"" + g.backend() + "\")";
      });

  py::class_<Work>(m, "Work",
                   "The handle of an operation issued with isend/irecv or async_op=True (torch.distributed's "
                   "Work). Its tensors belong to the operation until it completes.")
      .def(
          "_wait",
          [](const Work& w, std::optional<double> timeout_s) {
            py::gil_scoped_release release;
            if (timeout_s) {
              w.wait(to_ms(*timeout_s, "Work.wait"));
            } else {
              w.wait();
            }
            return true;
          },
          py::arg("timeout") = py::none(),
          "wait(timeout=None) -> True: blocks until the operation completes and raises its error if it failed. "
          "timeout: seconds (or a datetime.timedelta); past it thd.TimeoutError, and the operation stays pending "
          "(its own deadline still applies). Releases the GIL while it waits.")
      .def("is_completed", &Work::is_completed, "True once the operation has finished, successfully or not.")
      .def("is_success", [](const Work& w) { return w.is_completed() && !w.error(); },
           "True once the operation has finished without an error.")
      // Rethrown here, the error reaches Python as the thd exception it maps to
      // (errors.cpp); thd.Work.exception() catches it and returns it.
      .def("_raise_error",
           [](const Work& w) {
             if (const std::exception_ptr e = w.error()) std::rethrow_exception(e);
           })
      .def("source_rank", &Work::source,
           "After a receive completed: the rank (in its group) the message came from; -1 for other operations.");
}

void bind_p2p(py::module_& m) {
  m.def("_pg_send", [](const Tensor& t, int dst, const py::object& group, int64_t tag) {
    const Group g = group_from(group, "send");
    py::gil_scoped_release release;
    send(t, dst, g, P2POptions{.tag = tag});
  });
  m.def("_pg_recv", [](Tensor& t, int src, const py::object& group, int64_t tag) {
    const Group g = group_from(group, "recv");
    py::gil_scoped_release release;
    return recv(t, src, g, P2POptions{.tag = tag});
  });
  m.def("_pg_isend", [](const Tensor& t, int dst, const py::object& group, int64_t tag) {
    const Group g = group_from(group, "isend");
    py::gil_scoped_release release;
    return isend(t, dst, g, P2POptions{.tag = tag});
  });
  m.def("_pg_irecv", [](Tensor& t, int src, const py::object& group, int64_t tag) {
    const Group g = group_from(group, "irecv");
    py::gil_scoped_release release;
    return irecv(t, src, g, P2POptions{.tag = tag});
  });
}

void bind_collectives_on_tensors(py::module_& m) {
  m.def("_pg_all_reduce", [](Tensor& t, ReduceOp op, const py::object& group, bool async_op) {
    return run(group, async_op, "all_reduce", [&](const Group& g) { return iall_reduce(t, op, g); });
  });
  m.def("_pg_broadcast", [](Tensor& t, int src, const py::object& group, bool async_op) {
    return run(group, async_op, "broadcast", [&](const Group& g) { return ibroadcast(t, src, g); });
  });
  m.def("_pg_reduce", [](Tensor& t, int dst, ReduceOp op, const py::object& group, bool async_op) {
    return run(group, async_op, "reduce", [&](const Group& g) { return ireduce(t, dst, op, g); });
  });
  m.def("_pg_barrier", [](const py::object& group, bool async_op) {
    return run(group, async_op, "barrier", [&](const Group& g) { return ibarrier(g); });
  });
  m.def("_pg_all_gather_into_tensor", [](Tensor& out, const Tensor& in, const py::object& group, bool async_op) {
    return run(group, async_op, "all_gather_into_tensor",
               [&](const Group& g) { return iall_gather_into_tensor(out, in, g); });
  });
  m.def("_pg_reduce_scatter_tensor",
        [](Tensor& out, const Tensor& in, ReduceOp op, const py::object& group, bool async_op) {
          return run(group, async_op, "reduce_scatter_tensor",
                     [&](const Group& g) { return ireduce_scatter_tensor(out, in, op, g); });
        });
  m.def("_pg_all_to_all_single",
        [](Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
           const std::vector<int64_t>& in_splits, const py::object& group, bool async_op) {
          return run(group, async_op, "all_to_all_single",
                     [&](const Group& g) { return iall_to_all_single(out, in, out_splits, in_splits, g); });
        });
}

void bind_collectives_on_lists(py::module_& m) {
  m.def("_pg_all_gather", [](const Tensors& list, const Tensor& t, const py::object& group, bool async_op) {
    return run(group, async_op, "all_gather", [&](const Group& g) { return iall_gather(list, t, g); });
  });
  m.def("_pg_gather", [](const Tensor& t, const Tensors& list, int dst, const py::object& group, bool async_op) {
    return run(group, async_op, "gather", [&](const Group& g) { return igather(t, list, dst, g); });
  });
  m.def("_pg_scatter", [](Tensor& t, const Tensors& list, int src, const py::object& group, bool async_op) {
    return run(group, async_op, "scatter", [&](const Group& g) { return iscatter(t, list, src, g); });
  });
  m.def("_pg_reduce_scatter",
        [](Tensor& out, const Tensors& list, ReduceOp op, const py::object& group, bool async_op) {
          return run(group, async_op, "reduce_scatter",
                     [&](const Group& g) { return ireduce_scatter(out, list, op, g); });
        });
  m.def("_pg_all_to_all", [](const Tensors& outs, const Tensors& ins, const py::object& group, bool async_op) {
    return run(group, async_op, "all_to_all", [&](const Group& g) { return iall_to_all(outs, ins, g); });
  });
}

// The object collectives move bytes; python/thd/_process_group.py pickles.
Bytes bytes_of(const py::bytes& b) {
  const std::string_view s = b;
  return Bytes(s.begin(), s.end());
}

py::bytes to_py(const Bytes& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

py::list to_py(const std::vector<Bytes>& all) {
  py::list out;
  for (const Bytes& b : all) out.append(to_py(b));
  return out;
}

// Through the public object collectives, instantiated for byte vectors (their codec
// passes the bytes through).
void bind_object_bytes(py::module_& m) {
  m.def("_pg_broadcast_bytes", [](const py::bytes& b, int src, const py::object& group) {
    Bytes bytes = bytes_of(b);
    const Group g = group_from(group, "broadcast_object_list");
    {
      py::gil_scoped_release release;
      broadcast_object(bytes, src, g);
    }
    return to_py(bytes);
  });
  m.def("_pg_all_gather_bytes", [](const py::bytes& b, const py::object& group) {
    const Bytes bytes = bytes_of(b);
    const Group g = group_from(group, "all_gather_object");
    std::vector<Bytes> all;
    {
      py::gil_scoped_release release;
      all_gather_object(all, bytes, g);
    }
    return to_py(all);
  });
  m.def("_pg_gather_bytes", [](const py::bytes& b, int dst, const py::object& group) {
    const Bytes bytes = bytes_of(b);
    const Group g = group_from(group, "gather_object");
    std::vector<Bytes> all;
    {
      py::gil_scoped_release release;
      gather_object(bytes, all, dst, g);
    }
    return to_py(all);
  });
  m.def("_pg_scatter_bytes", [](const std::vector<py::bytes>& inputs, int src, const py::object& group) {
    std::vector<Bytes> all;
    for (const py::bytes& b : inputs) all.push_back(bytes_of(b));
    const Group g = group_from(group, "scatter_object_list");
    Bytes mine;
    {
      py::gil_scoped_release release;
      scatter_object(mine, all, src, g);
    }
    return to_py(mine);
  });
}

}  // namespace

void bind_process_group(py::module_& m) {
  bind_classes(m);
  bind_init(m);
  bind_p2p(m);
  bind_collectives_on_tensors(m);
  bind_collectives_on_lists(m);
  bind_object_bytes(m);
}

}  // namespace thd::python
