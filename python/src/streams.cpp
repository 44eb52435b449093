// Streams and events of worker nodes (include/thd/stream.h) with torch.cuda's
// Python names: thd.Stream(node=None, priority=0), stream.record_event(),
// stream.wait_event(e), stream.wait_stream(s), thd.Event(enable_timing=False),
// and `with thd.stream(s):`. Every call that waits for a worker releases the GIL.
#include <memory>
#include <optional>

#include <pybind11/stl.h>

#include <thd/stream.h>

#include "bindings.h"

namespace thd::python {

namespace {


Stream::Priority priority_of(int priority) {
  // torch.cuda.Stream: 0 is the default, a negative number a higher priority.
  if (priority > 0) {
    throw ValueError("Stream: priority must be 0 (normal) or negative (high), as torch.cuda.Stream's, got " +
                         std::to_string(priority),
                     ErrorContext{.op = "Stream"});
  }
  return priority < 0 ? Stream::Priority::High : Stream::Priority::Normal;
}


void bind_stream(py::module_& m) {
  py::class_<Stream> s(m, "Stream", R"doc(Stream(node=None, priority=0): a new stream of a worker node.

Ops issued on one stream run in issue order; ops of different streams of a node may
overlap. Order streams with events (record_event / wait_event), as with
torch.cuda.Stream. node=None is the current node (thd.node scope); priority 0 is
normal, a negative one high (a hint). A node has at most max_streams_per_node live
streams; a stream goes when its last handle does.)doc");
  s.def(py::init([](std::optional<int> node, int priority) {
          const Stream::Priority p = priority_of(priority);
          py::gil_scoped_release release;
          return node ? Stream::create(*node, p) : Stream::create(p);
        }),
        py::arg("node") = py::none(), py::arg("priority") = 0);
  s.def_property_readonly("node", &Stream::node, "The node the stream belongs to.");
  s.def_property_readonly("id", &Stream::id, "Its id on the node; 0 is the node's default stream.");
  s.def_property_readonly("is_default", &Stream::is_default, "True for a node's default stream.");
  s.def_property_readonly(
      "priority", [](const Stream& st) { return st.priority() == Stream::Priority::High ? -1 : 0; },
      "0 (normal) or -1 (high), as torch.cuda.Stream.priority.");
  s.def("synchronize", &Stream::synchronize, Release(),
        "Waits until everything issued on this stream so far has run; raises the first failure on it "
        "(thd.RemoteError) or thd.WorkerLost.");
  s.def("query", &Stream::query, Release(), "True when everything issued on this stream so far has run.");
  s.def(
      "record_event",
      [](const Stream& st, std::optional<Event> event) {
        py::gil_scoped_release release;
        if (!event) return st.record();
        event->record(st);
        return *event;
      },
      py::arg("event") = py::none(),
      "Records `event` (a new one when None) on this stream now and returns it.");
  s.def("wait_event", &Stream::wait, py::arg("event"), Release(),
        "Work issued on this stream from now on waits for `event`'s latest record, on whichever node it was "
        "recorded (an event never recorded: no wait).");
  s.def(
      "wait_stream", [](const Stream& st, const Stream& other) { st.wait(other.record()); }, py::arg("stream"),
      Release(), "Work issued on this stream from now on waits for what was issued on `stream` so far.");
  s.def("__eq__", [](const Stream& a, const Stream& b) { return a == b; }, py::is_operator());
  s.def("__hash__", [](const Stream& st) { return py::hash(py::make_tuple(st.node(), st.id())); });
  s.def("__repr__", [](const Stream& st) {
    return "thd.Stream(node=" + std::to_string(st.node()) + ", id=" + std::to_string(st.id()) + ")";
  });

  m.def(
      "default_stream", [](std::optional<int> node) { return Stream::default_stream(node); },
      py::arg("node") = py::none(), "The default stream of `node` (None: the current node).");
  m.def(
      "current_stream", [](std::optional<int> node) { return current_stream(node); },
      py::arg("node") = py::none(),
      "The stream ops go to on this thread for `node` (None: the current node): the innermost thd.stream "
      "scope's, else the node's default stream.");

  using PyStreamScope = PyScope<StreamScope, Stream>;
  py::class_<PyStreamScope> scope(m, "stream", R"doc(stream(s): ops issued inside `with thd.stream(s):` run on s.

The scope's node is the stream's node too (as torch.cuda.stream(s) selects s's
device). Nestable and per thread.)doc");
  scope.def(py::init([](Stream stream) { return PyStreamScope(std::move(stream), "stream"); }), py::arg("stream"));
  scope.def_property_readonly("stream", &PyStreamScope::arg, "The stream the scope issues to.");
  PyStreamScope::bind_context(scope);
}

void bind_event(py::module_& m) {
  py::class_<Event> e(m, "Event", R"doc(Event(enable_timing=False): a marker in a stream's work, as torch.cuda.Event.

It belongs to the node it is first recorded on; a stream of any node may wait for
it. With enable_timing, elapsed_time() measures between two events of one node.)doc");
  e.def(py::init<bool>(), py::arg("enable_timing") = false);
  e.def(
      "record",
      [](Event& ev, std::optional<Stream> stream) {
        py::gil_scoped_release release;
        if (stream) ev.record(*stream);
        else ev.record();
      },
      py::arg("stream") = py::none(),
      "Records the work issued so far on `stream` (None: the current stream of the current node).");
  e.def(
      "wait",
      [](const Event& ev, std::optional<Stream> stream) {
        py::gil_scoped_release release;
        (stream ? *stream : current_stream()).wait(ev);
      },
      py::arg("stream") = py::none(),
      "Makes `stream` (None: the current stream) wait for this event's latest record.");
  e.def("query", &Event::query, Release(), "True once its latest record has run (never recorded: True).");
  e.def("synchronize", &Event::synchronize, Release(),
        "Waits until its latest record has run; raises the failure it carries (thd.RemoteError).");
  e.def("elapsed_time", &Event::elapsed_time, py::arg("end_event"), Release(),
        "Milliseconds from this event's record to `end_event`'s (both timed, recorded on one node, complete).");
  e.def_property_readonly("node", &Event::node, "The node it was recorded on; None before its first record.");
  e.def_property_readonly("enable_timing", &Event::timing, "Whether elapsed_time() may be asked of it.");
}

}  // namespace

void bind_streams(py::module_& m) {
  bind_stream(m);
  bind_event(m);
}

}  // namespace thd::python
