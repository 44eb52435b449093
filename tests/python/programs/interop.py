"""A master-worker job (thdrun -n 3: nodes 0 and 1): DistributedTensor.from_ uploads
thd tensors, NumPy arrays, lists and torch tensors (through DLPack, every dtype, any
strides) to a worker, and what get() downloads reaches NumPy and torch without a
copy. The torch parts run when torch is installed."""

import datetime

import numpy as np

import thd

try:
    import torch
except ImportError:
    torch = None

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))


def values(d):
    return d.to(thd.float64).numpy() if d.dtype == thd.bfloat16 else d.numpy()


# ---- thd, NumPy, lists ----
a = np.arange(12, dtype=np.float32).reshape(3, 4)
d = thd.DistributedTensor.from_(a, node=1)
assert d.node == 1 and d.shape == (3, 4) and d.dtype == thd.float32
np.testing.assert_array_equal(d.numpy(), a)
d = thd.DistributedTensor.from_(a[:, ::2])  # strided: uploaded as its values
assert d.node == 0
np.testing.assert_array_equal(d.numpy(), a[:, ::2])
d = thd.DistributedTensor.from_(thd.tensor([[1, 2], [3, 4]], dtype="int32"), node=1)
assert d.dtype == thd.int32 and d.tolist() == [[1, 2], [3, 4]]
with thd.node(1):
    assert thd.DistributedTensor.from_([1.5, 2.5]).node == 1
assert thd.DistributedTensor.from_(3).item() == 3
try:
    thd.DistributedTensor.from_(object())
    raise AssertionError("from_(object()) did not raise")
except thd.TypeError as e:
    assert "got object" in str(e), e

# ---- what get() downloads is shared, not copied, by NumPy and torch ----
g = (thd.DistributedTensor.from_(a, node=1) * 2).get()
n = g.numpy()
assert n.__array_interface__["data"][0] == g.data_ptr()
assert np.from_dlpack(g).__array_interface__["data"][0] == g.data_ptr()
np.testing.assert_array_equal(n, a * 2)

if torch is not None:
    assert torch.from_dlpack(g).data_ptr() == g.data_ptr()
    for name in ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]:
        x = (torch.arange(12) % 3).reshape(3, 4).to(getattr(torch, name))
        for node in (0, 1):
            d = thd.DistributedTensor.from_(x, node=node)
            assert d.node == node and d.dtype == getattr(thd, name) and d.shape == (3, 4), (name, d)
            np.testing.assert_array_equal(values(d), x.double().numpy().astype(values(d).dtype))
        # Transposed: the upload reads it where it lies, in its strides.
        d = thd.DistributedTensor.from_(x.t(), node=1)
        assert d.shape == (4, 3)
        np.testing.assert_array_equal(values(d), x.t().double().numpy().astype(values(d).dtype))
    y = torch.linspace(0, 1, 50, dtype=torch.float64)
    d = thd.from_dlpack(y.view(5, 10).t()).dist_send(1)
    assert d.shape == (10, 5) and torch.equal(torch.from_dlpack(d.get()), y.view(5, 10).t())
    back = torch.from_dlpack(thd.DistributedTensor.from_(y, node=1).get())
    assert torch.equal(back, y)
    print("torch tensors uploaded")

thd.shutdown()
print("PASS interop.py")
