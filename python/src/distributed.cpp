// Master-worker mode: joining the job, thd.DistributedTensor and thd.node scopes.
// Every call that can wait for a worker (init, get, item, synchronize, shutdown, and
// ops that block under flow control) releases the GIL, so other Python threads run
// while the master waits.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include <thd/distributed.h>

#include "bindings.h"
#include "operand.h"

namespace thd::python {

namespace {

using DT = DistributedTensor;

// The knobs of MasterWorkerOptions beyond the rendezvous; None keeps C++'s default.
struct Knobs {
  std::optional<std::string> bind_host;
  std::optional<int64_t> max_ops_in_flight;
  std::optional<int64_t> max_bytes_in_flight;
  std::optional<int64_t> batch_bytes;
  std::optional<double> flush_after_s;
  std::optional<int> max_streams_per_node;
};

void init(const std::optional<std::string>& backend, const std::optional<std::string>& init_method,
          double timeout_s, std::optional<int> world_size, std::optional<int> rank,
          std::optional<std::string> token, const Knobs& knobs) {
  // A year bounds the conversion to milliseconds (inf would overflow it).
  constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;
  if (!(timeout_s > 0) || timeout_s > kMaxTimeoutS) {
    throw ValueError("init_master_worker: timeout must be positive and at most a year, got " +
                         std::to_string(timeout_s) + " s",
                     ErrorContext{.op = "init_master_worker"});
  }
  MasterWorkerOptions options;
  options.backend = backend.value_or("");
  if (init_method) options.init_method = *init_method;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0 + 0.5));
  options.world_size = world_size.value_or(-1);
  options.rank = rank.value_or(-1);
  options.token = std::move(token);
  if (knobs.bind_host) options.bind_host = *knobs.bind_host;
  if (knobs.max_ops_in_flight) options.max_ops_in_flight = *knobs.max_ops_in_flight;
  if (knobs.max_bytes_in_flight) options.max_bytes_in_flight = *knobs.max_bytes_in_flight;
  if (knobs.batch_bytes) options.batch_bytes = *knobs.batch_bytes;
  if (knobs.flush_after_s) {
    if (!(*knobs.flush_after_s >= 0) || *knobs.flush_after_s > 3600) {
      throw ValueError("init_master_worker: flush_after must be between 0 and 3600 s, got " +
                           std::to_string(*knobs.flush_after_s) + " s",
                       ErrorContext{.op = "init_master_worker"});
    }
    options.flush_after = std::chrono::microseconds(static_cast<int64_t>(*knobs.flush_after_s * 1e6 + 0.5));
  }
  if (knobs.max_streams_per_node) options.max_streams_per_node = *knobs.max_streams_per_node;
  py::gil_scoped_release release;
  init_master_worker(options);
}


void bind_session(py::module_& m) {
  m.def("_init_master_worker",
        [](const std::optional<std::string>& backend, const std::optional<std::string>& init_method, double timeout,
           std::optional<int> world_size, std::optional<int> rank, std::optional<std::string> token,
           std::optional<std::string> bind_host, std::optional<int64_t> max_ops_in_flight,
           std::optional<int64_t> max_bytes_in_flight, std::optional<int64_t> batch_bytes,
           std::optional<double> flush_after, std::optional<int> max_streams_per_node) {
          init(backend, init_method, timeout, world_size, rank, std::move(token),
               Knobs{std::move(bind_host), max_ops_in_flight, max_bytes_in_flight, batch_bytes, flush_after,
                     max_streams_per_node});
        });
  m.def("is_master", &is_master, "True on the master between init_master_worker() and shutdown().");
  m.def("num_nodes", &num_nodes, "The number of worker nodes.");
  m.def("shutdown", &shutdown, Release(), "Ends the session; see thd.shutdown.");
  m.def("synchronize", &synchronize, Release(), "Waits for every node; see thd.synchronize.");
  m.def("manual_seed_all", &manual_seed_all, py::arg("seed"),
        "Seeds every node's generator: node k draws from (seed, k).");
  m.def("current_node", &current_node, "The node new tensors go to on this thread.");
  using PyNodeScope = PyScope<NodeScope, int>;
  py::class_<PyNodeScope> scope(m, "node", R"doc(node(k): tensors made inside `with thd.node(k):` live on node k.

Nestable and per thread, as C++ thd::NodeScope; thd.IndexError for a negative node
(a node past the last is refused when a tensor is made there).)doc");
  scope.def(py::init([](int node) { return PyNodeScope(node, "node"); }), py::arg("node"));
  scope.def_property_readonly("index", &PyNodeScope::arg, "The node of this scope.");
  PyNodeScope::bind_context(scope);
}

void bind_factories(py::module_& m) {
  using OptNode = std::optional<int>;
  m.def("_empty", [](const Shape& s, DType d, OptNode n) { return on_node(n, [&] { return DT::empty(s, d); }); },
        Release());
  m.def("_zeros", [](const Shape& s, DType d, OptNode n) { return on_node(n, [&] { return DT::zeros(s, d); }); },
        Release());
  m.def("_ones", [](const Shape& s, DType d, OptNode n) { return on_node(n, [&] { return DT::ones(s, d); }); },
        Release());
  m.def("_full", [](const Shape& s, Scalar v, DType d, OptNode n) {
    return on_node(n, [&] { return DT::full(s, v, d); });
  }, Release());
  m.def("_rand", [](const Shape& s, DType d, OptNode n) { return on_node(n, [&] { return DT::rand(s, d); }); },
        Release());
  m.def("_randn", [](const Shape& s, DType d, OptNode n) { return on_node(n, [&] { return DT::randn(s, d); }); },
        Release());
  m.def("_arange", [](Scalar start, Scalar end, Scalar step, std::optional<DType> d, OptNode n) {
    return on_node(n, [&] { return DT::arange(start, end, step, d); });
  }, Release());
}

py::tuple shape_tuple(const DT& t) { return py::tuple(py::cast(t.shape())); }

// max/min as torch's: over everything, a 0-dim tensor; over one int dim, the pair
// (values, indices) as thd.return_types.max/min; against another tensor, the
// elementwise maximum/minimum. amax/amin take several dims and give values only. A
// sequence of dims for max is a TypeError, not the values alone: torch code unpacks
// `values, indices = x.max(dim)`, which would silently split the values' rows.
template <DT (DT::*All)() const, DT (DT::*Over)(const Dims&, bool) const,
          DT (DT::*Arg)(int64_t, bool) const, DT (DT::*Elementwise)(const DT&) const>
void bind_extremum(py::class_<DT>& c, const char* name, const char* values_name, const char* elementwise_name,
                   const char* what) {
  c.def(name, [name, values_name, elementwise_name](const DT& t, const py::object& dim, bool keepdim) -> py::object {
    if (py::isinstance<DT>(dim)) {
      const DT& other = dim.cast<const DT&>();
      py::gil_scoped_release release;
      return py::cast((t.*Elementwise)(other));
    }
    if (dim.is_none()) return py::cast(reduce<All, Over>(t, dim, keepdim, name));
    if (!py::isinstance<py::int_>(dim)) {
      throw TypeError(std::string(name) + "(): dim must be an int, got " +
                          py::str(py::type::of(dim).attr("__name__")).cast<std::string>() + "; " + name +
                          " over one dim returns (values, indices); use " + values_name +
                          "(dim) to reduce over several dims, or " + elementwise_name + "(other) for two tensors",
                      ErrorContext{.op = name});
    }
    const int64_t d = dim.cast<int64_t>();
    std::pair<DT, DT> result = [&] {
      py::gil_scoped_release release;
      return std::pair<DT, DT>((t.*Over)(Dims{d}, keepdim), (t.*Arg)(d, keepdim));
    }();
    return py::module_::import("thd.return_types").attr(name)(std::move(result.first), std::move(result.second));
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false,
        (std::string("The ") + what + " value: over everything (a 0-dim tensor); over one int dim, (values, indices) "
         "as thd.return_types." + name + " (the index of the first such value, as torch); or, given another tensor, "
         "the elementwise " + elementwise_name + ".").c_str());
  c.def(values_name, [values_name](const DT& t, const py::object& dim, bool keepdim) {
    // torch's amax(dim=()) reduces every dim, as dim=None does here.
    const bool every = dim.is_none() || (py::isinstance<py::sequence>(dim) && py::len(dim) == 0);
    if (every && !keepdim) {
      py::gil_scoped_release release;
      return (t.*All)();
    }
    return reduce<All, Over>(t, every ? py::none() : dim, keepdim, values_name);
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false,
        (std::string("The ") + what + " values over `dim` (an int or a sequence; every dim when None or ()), "
         "without indices.").c_str());
}

// sum/mean/max/min: over everything (dim=None) or over `dim` (an int or a sequence).
void bind_tensor_class(py::module_& m) {
  py::class_<DT> c(m, "DistributedTensor", R"doc(A tensor that lives on a worker node (C++ thd::DistributedTensor).

A handle: copies share the remote tensor, freed when the last handle goes. Ops
return at once (the master checks shapes and dtypes, so bad calls raise at the
call site) and run on the node in order; .get(), .item(), .tolist(), .numpy() and
thd.synchronize() wait for them, and raise thd.RemoteError for an op that failed on
the worker.)doc");

  // ---- metadata ----
  c.def_property_readonly("shape", &shape_tuple, "The sizes of its dims, a tuple of ints.");
  c.def_property_readonly("dtype", &DT::dtype, "Its element type (thd.float32, ...).");
  c.def_property_readonly("node", &DT::node, "The worker node it lives on.");
  c.def("size", &shape_tuple, "The shape, a tuple of ints.");
  c.def("size", &DT::size, py::arg("dim"), "The size of dim `dim` (negative counts from the end).");
  c.def("dim", &DT::dim, "The number of dims.");
  c.def("numel", &DT::numel, "The number of elements.");
  c.def("__len__", [](const DT& t) {
    if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
    return t.size(0);
  });
  c.def("__repr__", &DT::str);
  // As torch: the truth of a one-element tensor is its value (a sync point); of any
  // other, an error rather than Python's default True, which `if a == b:` would hit.
  c.def("__bool__", [](const DT& t) {
    if (t.numel() != 1) {
      throw ValueError("bool: the truth value of a tensor of " + std::to_string(t.numel()) +
                           " elements is ambiguous; use .sum(), .max() or .tolist()",
                       ErrorContext{.op = "bool"});
    }
    py::gil_scoped_release release;
    return t.item().to_bool();
  });

  // ---- moving data (sync points) ----
  c.def("get", &DT::get, Release(), "Waits for the tensor and downloads it: a local thd.Tensor.");
  c.def("item", [](const DT& t) {
    Scalar s;
    {
      py::gil_scoped_release release;
      s = t.item();
    }
    return s;
  }, "Waits for a one-element tensor and returns its value as a Python bool, int or float.");
  c.def("tolist", [](const DT& t) {
    Tensor local;
    {
      py::gil_scoped_release release;
      local = t.get();
    }
    return tensor_to_list(local);
  }, "Waits for the tensor and returns its values as a nested list.");
  c.def("numpy", [](const DT& t) {
    Tensor local;
    {
      py::gil_scoped_release release;
      local = t.get();
    }
    return tensor_to_numpy(local);
  }, "Waits for the tensor and returns a NumPy array holding its values.");
  c.def("to_node", &DT::to_node, py::arg("node"), Release(),
        "A copy on node `node`, sent straight between the workers (the tensor itself when it is "
        "already there).");
  c.def("to", [](const DT& t, DType d) { return t.to(d); }, py::arg("dtype"), Release(),
        "A copy converted to `dtype` (the tensor itself when it already has it).");

  // ---- views ----
  c.def("view", [](const DT& t, const py::args& s) { return t.view(shape_from_args(s, "view")); },
        "A view with another shape of the same number of elements (one size may be -1).");
  c.def("reshape", [](const DT& t, const py::args& s) { return t.reshape(shape_from_args(s, "reshape")); },
        "As view(), copying when the strides do not allow a view.");
  c.def("transpose", &DT::transpose, py::arg("dim0"), py::arg("dim1"), "A view with dims dim0 and dim1 swapped.");
  c.def("t", &DT::t, "The transpose of a tensor of at most 2 dims (a view).");
  c.def("contiguous", &DT::contiguous, "The tensor itself when contiguous, else a contiguous copy.");
  c.def("clone", &DT::clone, "A contiguous copy on the same node.");

  // ---- arithmetic: one binding per op takes a tensor or a number (operand.h) ----
  bind_binary_operator(c, "__add__", "+", [](const DT& a, const auto& b) { return a + b; });
  bind_reflected_operator(c, "__radd__", "+", [](const auto& a, const auto& b) { return a + b; });
  bind_binary_operator(c, "__sub__", "-", [](const DT& a, const auto& b) { return a - b; });
  bind_reflected_operator(c, "__rsub__", "-", [](const auto& a, const auto& b) { return a - b; });
  bind_binary_operator(c, "__mul__", "*", [](const DT& a, const auto& b) { return a * b; });
  bind_reflected_operator(c, "__rmul__", "*", [](const auto& a, const auto& b) { return a * b; });
  bind_binary_operator(c, "__truediv__", "/", [](const DT& a, const auto& b) { return a / b; });
  bind_reflected_operator(c, "__rtruediv__", "/", [](const auto& a, const auto& b) { return a / b; });
  c.def("__matmul__", [](const DT& a, py::handle b) -> py::object {
    if (const DT* t = as_distributed(b)) {
      py::gil_scoped_release release;
      return py::cast(a.matmul(*t));
    }
    if (is_local_array(b)) refuse_local_operand(a, b, "@", /*reflected=*/false);
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }, py::is_operator());
  // Only a foreign left operand gets here (two DistributedTensors go to __matmul__).
  c.def("__rmatmul__", [](const DT& a, py::handle b) -> py::object {
    if (const DT* t = as_distributed(b)) {
      py::gil_scoped_release release;
      return py::cast(t->matmul(a));
    }
    if (is_local_array(b)) refuse_local_operand(a, b, "@", /*reflected=*/true);
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }, py::is_operator());
  c.def("__neg__", [](const DT& a) { return -a; }, Release());
  bind_inplace(c, "__iadd__", [](DT& a, const auto& b) { a += b; }, /*is_operator=*/true);
  bind_inplace(c, "__isub__", [](DT& a, const auto& b) { a -= b; }, /*is_operator=*/true);
  bind_inplace(c, "__imul__", [](DT& a, const auto& b) { a *= b; }, /*is_operator=*/true);
  bind_inplace(c, "__itruediv__", [](DT& a, const auto& b) { a /= b; }, /*is_operator=*/true);
  c.def("matmul", &DT::matmul, py::arg("other"), Release(), "Matrix product (torch.matmul); also `a @ b`.");
  c.def("fill_", &DT::fill_, py::arg("value"), Release(), "Sets every element to `value` and returns self.");

  c.def("index_select", &DT::index_select, py::arg("dim"), py::arg("index"), Release(),
        "The entries of dim `dim` that `index` (an int64 or int32 DistributedTensor on the same node) "
        "names. An index out of range is found by the worker: thd.RemoteError at the next sync point.");

  // ---- comparisons (bool tensors) ----
  bind_binary_operator(c, "__eq__", "==", [](const DT& a, const auto& b) { return a.eq(b); });
  bind_binary_operator(c, "__ne__", "!=", [](const DT& a, const auto& b) { return a.ne(b); });
  bind_binary_operator(c, "__lt__", "<", [](const DT& a, const auto& b) { return a.lt(b); });
  bind_binary_operator(c, "__le__", "<=", [](const DT& a, const auto& b) { return a.le(b); });
  bind_binary_operator(c, "__gt__", ">", [](const DT& a, const auto& b) { return a.gt(b); });
  bind_binary_operator(c, "__ge__", ">=", [](const DT& a, const auto& b) { return a.ge(b); });
  // Tensors hash by identity, as torch's do, although == is elementwise.
  c.def("__hash__", [](const py::object& self) { return reinterpret_cast<intptr_t>(self.ptr()) >> 4; });

  // ---- reductions ----
  c.def("sum", [](const DT& t, const py::object& dim, bool keepdim) {
    return reduce<&DT::sum, &DT::sum>(t, dim, keepdim, "sum");
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false,
        "The sum over every element (a 0-dim tensor), or over `dim` (an int or a sequence).");
  c.def("mean", [](const DT& t, const py::object& dim, bool keepdim) {
    return reduce<&DT::mean, &DT::mean>(t, dim, keepdim, "mean");
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false, "The mean, as sum(); floating tensors only.");
  bind_extremum<&DT::max, &DT::max, &DT::argmax, &DT::maximum>(c, "max", "amax", "maximum", "largest");
  bind_extremum<&DT::min, &DT::min, &DT::argmin, &DT::minimum>(c, "min", "amin", "minimum", "smallest");
}

}  // namespace

void bind_distributed(py::module_& m) {
  bind_session(m);
  bind_factories(m);
  bind_tensor_class(m);
}

}  // namespace thd::python
