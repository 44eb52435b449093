// Graphs (include/thd/graph.h, docs/graphs.md) from Python:
//
//   with thd.graph() as g:      # nothing runs inside
//       y = x * w
//   g.replay()                  # asynchronous, like any op
//
// `with thd.graph()` yields an empty thd.Graph that the end of the block fills with
// the captured graph; an exception out of the block discards the capture. Every
// call that may wait for a worker releases the GIL.
#include <memory>
#include <optional>

#include <pybind11/stl.h>

#include <thd/graph.h>

#include "bindings.h"

namespace thd::python {

namespace {

// The context manager: the capture lives between __enter__ and __exit__, on the
// thread that entered it (a capture is its thread's).
struct PyGraphCapture {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  std::optional<GraphCapture> capture;
  bool used = false;
};

}  // namespace

void bind_graphs(py::module_& m) {
  py::class_<Graph, std::shared_ptr<Graph>> g(m, "Graph", R"doc(A captured graph (with thd.graph() as g: ...).

g.replay() runs its ops once more on every node it spans (one command per node,
asynchronous, in order with the ops around it). Tensors made inside the capture
hold what the latest replay computed; tensors from outside are its inputs and
outputs, updated in place between replays.)doc");
  g.def(py::init<>());
  g.def("replay", &Graph::replay, Release(), "Runs the graph once more (asynchronous).");
  g.def("reset", &Graph::reset, Release(), "Frees the graph's tensors and forgets its commands on every node.");
  g.def("memory_bytes", &Graph::memory_bytes, py::arg("node"),
        "Bytes of tensor memory the graph's own tensors hold on `node`.");
  g.def_property_readonly("defined", &Graph::defined, "False for an empty or reset graph.");
  g.def_property_readonly("id", &Graph::id, "The graph's id in its session.");
  g.def_property_readonly("replays", &Graph::replays, "Replays issued so far.");
  g.def_property_readonly("nodes", &Graph::nodes, "The nodes the graph runs on.");
  g.def_property_readonly("num_ops", &Graph::num_ops, "Commands captured, on every node.");
  g.def("__bool__", &Graph::defined);

  py::class_<PyGraphCapture> c(m, "graph", R"doc(graph(): `with thd.graph() as g:` captures the ops the block issues.

Nothing runs during the capture (CUDA's stream capture); a sync point inside it
(numpy(), item(), thd.synchronize(), ...) raises thd.Error naming the call. g is
the captured thd.Graph once the block has ended; an exception out of the block
discards the capture.)doc");
  c.def(py::init<>());
  c.def("__enter__", [](PyGraphCapture& self) {
    if (self.used) {
      throw ValueError("thd.graph: a graph() captures once: make a new one for another capture",
                       ErrorContext{.op = "graph"});
    }
    self.used = true;
    self.capture.emplace();
    return self.graph;
  });
  c.def("__exit__", [](PyGraphCapture& self, const py::object& type, const py::object&, const py::object&) {
    if (!self.capture) return false;
    if (!type.is_none()) {
      self.capture.reset();  // discards: nothing was sent
      return false;
    }
    Graph captured;
    {
      py::gil_scoped_release release;
      captured = self.capture->end();
    }
    self.capture.reset();
    *self.graph = std::move(captured);
    return false;
  });
}

}  // namespace thd::python
