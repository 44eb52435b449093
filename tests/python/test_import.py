"""The package imports, has docstrings on its public names, and its dtypes."""

import inspect
import pathlib
import re

import numpy as np
import pytest

import thd


def test_import_without_a_job():
    assert thd.__version__
    assert not thd.is_master()
    assert thd.current_node() == 0


def own_doc(obj, name):
    """The docstring without the signature lines pybind11 writes for every function,
    so that a binding without a docstring of its own has none."""
    doc = inspect.getdoc(obj) or ""
    lines = [line for line in doc.splitlines()
             if not re.match(rf"^(\d+\. )?{re.escape(name)}\(", line) and line.strip() != "Overloaded function."]
    return "\n".join(lines).strip()


PUBLIC_FUNCTIONS = [
    "init_master_worker", "shutdown", "synchronize", "is_master", "num_nodes", "manual_seed_all", "current_node",
    "empty", "zeros", "ones", "full", "arange", "rand", "randn", "from_numpy", "tensor", "promote_types",
    "FloatTensor", "DoubleTensor", "LongTensor", "IntTensor",
]


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_public_function_has_a_docstring(name):
    assert len(own_doc(getattr(thd, name), name)) > 20, name


def test_init_master_worker_help_says_what_it_does():
    doc = inspect.getdoc(thd.init_master_worker)
    assert "Joins a master-worker job" in doc
    assert "timeout" in doc


@pytest.mark.parametrize("cls", [thd.Tensor, thd.DistributedTensor, thd.node, thd.dtype, thd.Stream, thd.Event,
                                 thd.stream])
def test_classes_and_methods_have_docstrings(cls):
    assert cls.__doc__
    for name, member in vars(cls).items():
        if name.startswith("_") or not callable(member) and not isinstance(member, property):
            continue
        if cls is thd.dtype and name == "value":  # pybind11's own, of every enum
            continue
        assert own_doc(member, name), f"{cls.__name__}.{name}"


def test_error_classes_have_docstrings():
    for name in thd.errors.__all__:
        assert getattr(thd, name).__doc__, name


def test_every_dtype_of_the_cpp_api():
    names = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
    assert list(thd.dtype.__members__) == names
    for name in names:
        dt = getattr(thd, name)
        assert isinstance(dt, thd.dtype)
        assert dt.name == name
        assert repr(dt) == f"thd.{name}"
    assert (thd.float, thd.double, thd.half, thd.long, thd.int) == (
        thd.float32, thd.float64, thd.float16, thd.int64, thd.int32)
    assert thd.float64.itemsize == 8 and thd.bfloat16.itemsize == 2
    assert thd.float16.is_floating_point and not thd.int64.is_floating_point
    assert thd.promote_types(thd.int32, thd.float32) == thd.float32


def test_numpy_dtypes_are_accepted_where_a_dtype_is():
    assert thd._to_dtype(np.float64) == thd.float64
    assert thd._to_dtype(np.dtype("int32")) == thd.int32
    assert thd._to_dtype("uint8") == thd.uint8
    assert thd._to_dtype(thd.bfloat16) == thd.bfloat16
    with pytest.raises(thd.TypeError, match="complex128"):
        thd._to_dtype(np.complex128)


def test_the_stub_names_what_exists():
    stub = (pathlib.Path(thd.__file__).parent / "__init__.pyi").read_text()
    for name in thd.__all__:
        assert re.search(rf"^(def |class )?{name}\b|\bas {name}\b", stub, re.M), name
