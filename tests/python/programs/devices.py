"""Devices with torch's names: thd.device (a value and a scope), device= on the
factories, .device/.is_cuda/.cuda()/.cpu()/.to(device). Workers without a GPU
refuse cuda tensors with a RemoteError naming the node and the GPUs it has."""

import numpy as np

import thd

thd.init_master_worker(timeout=60)

cpu = thd.device("cpu")
assert str(cpu) == "cpu" and repr(cpu) == "device(type='cpu')" and cpu.type == "cpu" and cpu.index is None
gpu1 = thd.device("cuda", 1)
assert str(gpu1) == "cuda:1" and gpu1 == thd.device("cuda:1") and gpu1 == "cuda:1" and gpu1.index == 1
assert thd.device("cuda") == "cuda:0" and hash(thd.device("cuda:0")) == hash(thd.device("cuda", 0))
assert thd.current_device() == cpu
for bad, why in [("gpu", "not a device type"), ("cuda:x", "no valid device index"), ("cuda:-1", "no valid"),
                 ("cpu:0", "no index")]:
    try:
        thd.device(bad)
    except thd.ValueError as e:
        assert why in str(e), e
    else:
        raise AssertionError(f"thd.device({bad!r}) was accepted")
try:
    thd.zeros(2).to(3)
except thd.TypeError as e:
    assert "expected a thd.device" in str(e), e
else:
    raise AssertionError("to(3) was accepted")

x = thd.arange(6, node=1, device="cpu").view(2, 3)
assert x.device == cpu and not x.is_cuda
assert x.cpu().device == cpu and x.to("cpu").device == cpu
np.testing.assert_array_equal(x.to(cpu, copy=True).get().numpy(), np.arange(6).reshape(2, 3))

gpus = [s["cuda_devices"] for s in thd.stats()]
for k in range(thd.num_nodes()):
    if gpus[k] > 0:
        y = x.to_node(k).cuda()
        assert y.is_cuda and y.device == "cuda:0"
        np.testing.assert_array_equal(y.cpu().get().numpy(), np.arange(6).reshape(2, 3))
        with thd.device("cuda:0"):
            z = thd.ones(3, node=k)
        assert z.device == "cuda:0"
        continue
    for make in (lambda: x.to_node(k).cuda().get(), lambda: thd.ones(3, node=k, device="cuda:0").get()):
        try:
            make()
        except thd.RemoteError as e:
            assert f"node {k} has no device cuda:0" in str(e) and "0 GPUs" in str(e), e
        else:
            raise AssertionError(f"node {k} made a cuda tensor without a GPU")
    with thd.device("cuda:0"):
        assert thd.current_device() == "cuda:0"
        z = thd.ones(3, node=k)
    assert thd.current_device() == cpu
    try:
        z.get()
    except thd.RemoteError as e:
        assert "has no device cuda:0" in str(e), e
    else:
        raise AssertionError("a cuda scope on a node without a GPU made a tensor")

# The session is fine after the refusals.
np.testing.assert_array_equal((thd.ones(2, node=0) * 3).get().numpy(), [3, 3])
thd.shutdown()
print("PASS devices.py")
