"""CUDA arrays (__cuda_array_interface__) in the Python binding (ctest
python_binding). The interface parsing and every refusal are checked with a
fake object, no GPU needed; the calls that reach a GPU run only where CuPy
or a CUDA torch sees a device (skipped with the reason otherwise)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402
from hb import _device  # noqa: E402


class FakeCuda:
    """An object with __cuda_array_interface__ (version 3) over a made-up
    device pointer: it must never reach a C call that dereferences it."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0xD0000000, readonly=False, **extra):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr, data=(ptr, readonly),
                                             strides=strides, version=3, **extra)


@pytest.fixture
def ctx():
    with hb.Context(rank=0, world_size=1) as c:
        yield c


def no_gpu(ctx):
    if ctx.num_gpus > 0:
        pytest.skip("a CUDA device is visible: a fake device pointer would reach the GPU path")


# ---- Parsing ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,strides", [((2, 3), None), ((2, 3), (12, 4)), ((4, 1, 3), (12, 999, 4)),
                                           ((0, 5), (4, 8)), ((), None)])
def test_contiguous_interfaces_are_read_without_a_copy(shape, strides):
    obj = FakeCuda(shape, "<i8" if strides is None else "<f4", strides=strides)
    arr = _device.device_array(obj, "x")
    assert arr.obj is obj and arr._hb_device_ptr == 0xD0000000 and arr.shape == shape
    assert arr.size == int(np.prod(shape)) and arr.dtype == np.dtype(obj.__cuda_array_interface__["typestr"])
    assert _device.is_device_array(obj) and not _device.is_device_array(np.zeros(3))


def test_stream_of_the_interface_is_kept():
    assert _device.device_array(FakeCuda((3,), stream=7), "x").stream == 7
    assert _device.device_array(FakeCuda((3,)), "x").stream is None


@pytest.mark.parametrize("obj,cls,text", [
    (FakeCuda((3, 2), strides=(4, 12)), hb.HbValueError, "not C-contiguous"),
    (FakeCuda((4,), strides=(8,)), hb.HbValueError, "not C-contiguous"),
    (FakeCuda((3,), ">f4"), hb.HbTypeError, "little-endian"),
    (FakeCuda((3,), "|O8"), hb.HbTypeError, "numeric"),
    (FakeCuda((3,), "<f4", mask=object()), hb.HbValueError, "masked"),
    (FakeCuda((3,), ptr=0), hb.HbValueError, "NULL pointer"),
    (FakeCuda((3,), strides=(4, 4)), hb.HbTypeError, "strides"),
])
def test_bad_interfaces_are_refused(obj, cls, text):
    with pytest.raises(cls, match=text) as info:
        _device.device_array(obj, "x")
    assert isinstance(info.value, hb.HbError) and info.value.status == hb.ERR_INVALID_ARGUMENT


def test_malformed_interface_is_refused():
    class Broken:
        __cuda_array_interface__ = {"shape": (3,)}

    class Raising:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("requires grad")

    with pytest.raises(hb.HbTypeError, match="lacks 'typestr'"):
        _device.device_array(Broken(), "x")
    assert _device.is_device_array(Raising())
    ctx = hb.Context(rank=0, world_size=1)
    with pytest.raises(hb.HbTypeError, match="requires grad"):
        ctx.allreduce(Raising(), recv=FakeCuda((3,)))
    ctx.close()


# ---- Collectives -----------------------------------------------------------------------

def test_collective_refusals_name_what_to_pass(ctx):
    with pytest.raises(hb.HbDeviceError, match="send is host memory but recv is a CUDA array"):
        ctx.allreduce(np.zeros(3, np.float32), recv=FakeCuda((3,)))
    with pytest.raises(hb.HbDeviceError, match="arrays\\[1\\]"):
        ctx.allreduce_many([FakeCuda((3,)), np.zeros(3, np.float32)])
    with pytest.raises(hb.HbValueError, match="hb does not allocate device memory"):
        ctx.allreduce(FakeCuda((3,)))
    with pytest.raises(hb.HbTypeError, match="expected a CUDA array of dtype float32, got int64"):
        ctx.allreduce(FakeCuda((3,)), recv=FakeCuda((3,), "<i8"))
    with pytest.raises(hb.HbValueError, match="needs 6 elements"):
        ctx.allgather(FakeCuda((6,)), recv=FakeCuda((3,)))
    with pytest.raises(hb.HbValueError, match="read-only"):
        ctx.broadcast(FakeCuda((3,), readonly=True))
    with pytest.raises(hb.HbValueError, match="not C-contiguous"):
        ctx.allreduce(FakeCuda((3, 2), strides=(4, 12)), recv=FakeCuda((6,)))


def test_device_arrays_without_cuda_are_refused_not_dereferenced(ctx):
    no_gpu(ctx)
    for call in (lambda: ctx.allreduce(FakeCuda((3,)), recv=FakeCuda((3,))),
                 lambda: ctx.broadcast(FakeCuda((3,))),
                 lambda: ctx.allreduce_many([FakeCuda((3,))])):
        with pytest.raises(hb.HbError, match="sees no CUDA device") as info:
            call()
        assert info.value.status == hb.ERR_UNSUPPORTED


# ---- Host-only calls ---------------------------------------------------------------------

def test_host_only_calls_refuse_device_arrays(ctx):
    f32, i64 = FakeCuda((3,)), FakeCuda((3,), "<i8")
    with hb.Metric(hb.METRIC_AUC) as m:
        with pytest.raises(hb.HbDeviceError, match="labels: a CUDA array .* host memory only"):
            m.update(f32, np.zeros(3, np.float32))
        with pytest.raises(hb.HbDeviceError):  # convert=True never copies a device array
            m.update(np.zeros(3, np.float32), f32, convert=True)
    with hb.Embedding(ctx, "host_t", 2, num_rows=8) as t:
        with pytest.raises(hb.HbDeviceError, match="this is a host table"):
            t.lookup(i64)
        with pytest.raises(hb.HbDeviceError, match="this is a host table"):
            t.apply_gradients(i64, FakeCuda((3, 2)))
        with pytest.raises(hb.HbTypeError, match="dtype int64, got float32"):
            t.lookup(f32)
        with hb.Collection(ctx, [t]) as coll:
            with pytest.raises(hb.HbDeviceError, match="values"):
                coll.lookup(i64, np.array([0, 3], np.int64))
    assert issubclass(hb.HbDeviceError, hb.HbTypeError) and issubclass(hb.HbDeviceError, hb.HbError)


def test_capi_takes_device_pointers_only_where_c_does(ctx):
    """The SWIG typemaps: a checked device array reaches only the calls whose
    C side takes CUDA memory; an unchecked __cuda_array_interface__ none."""
    dev = _device.device_array(FakeCuda((3,)), "labels")
    with pytest.raises(hb.HbDeviceError, match="hb_metric_update takes host memory only"):
        hb.capi.hb_metric_update(1, dev, dev, None, 3)
    with pytest.raises(hb.HbDeviceError, match="reaches hb.capi unchecked"):
        hb.capi.hb_allreduce(ctx._handle, FakeCuda((3,)), None, 3, hb.FLOAT32, hb.SUM)


# ---- Collections ---------------------------------------------------------------------------

def host_collection(ctx):
    """A host collection of one pooled and one pooling-NONE feature, over
    two tables (dims 2 and 3)."""
    a = hb.Embedding(ctx, "coll_a", 2, num_rows=8)
    b = hb.Embedding(ctx, "coll_b", 3, num_rows=8)
    return hb.Collection(ctx, [(a, hb.POOLING_SUM), (b, hb.POOLING_NONE)]), a, b


# B = 2: feature 0 has 3 ids, feature 1 (pooling NONE, dim 3) 2 ids.
OFFSETS = np.array([0, 2, 3, 3, 5], np.int64)


def test_host_collection_refuses_device_arrays(ctx):
    """Every array of a host collection's calls: a CUDA array is an
    HbDeviceError naming the parameter and what to pass, before C."""
    coll, a, b = host_collection(ctx)
    ids, off, w = np.zeros(5, np.int64), OFFSETS, np.ones(5, np.float32)
    out, rows = np.zeros((2, 2), np.float32), np.zeros(6, np.float32)
    dev = dict(values=FakeCuda((5,), "<i8"), offsets=FakeCuda((5,), "<i8"), weights=FakeCuda((5,)),
               out=FakeCuda((2, 2)), unpooled=FakeCuda((6,)), grad_out=FakeCuda((2, 2)),
               grad_unpooled=FakeCuda((6,)))
    lookups = dict(values=lambda x: coll.lookup(x, off), offsets=lambda x: coll.lookup(ids, x),
                   weights=lambda x: coll.lookup(ids, off, x), out=lambda x: coll.lookup(ids, off, out=x),
                   unpooled=lambda x: coll.lookup(ids, off, unpooled=x),
                   grad_out=lambda x: coll.apply_gradients(ids, off, x, grad_unpooled=rows),
                   grad_unpooled=lambda x: coll.apply_gradients(ids, off, out, w, x))
    for param, call in lookups.items():
        with pytest.raises(hb.HbDeviceError, match="%s: a CUDA array, but this is a host collection: pass a "
                           "numpy array" % param):
            call(dev[param])
    assert coll.device == -1 and coll.stats()["lookups"] == 0  # nothing reached C
    coll.close(), a.close(), b.close()


def test_gpu_collection_refuses_host_arrays_and_checks_sizes(ctx):
    """The Python routing of a GPU collection, without a GPU: a host
    collection whose device is set as a GPU one's. Every case is refused
    in Python (the fake device pointers never reach C)."""
    coll, a, b = host_collection(ctx)
    coll.device = 0
    i64, f32 = (lambda n: FakeCuda((n,), "<i8")), (lambda *s: FakeCuda(s))
    ids, off = i64(5), i64(5)
    cases = [
        (lambda: coll.lookup(np.zeros(5, np.int64), off), hb.HbDeviceError,
         r"values: host memory, but this is a GPU \(cuda:0\) collection: pass a CUDA array on that device"),
        (lambda: coll.lookup(ids, OFFSETS), hb.HbDeviceError, "offsets: host memory, but this is a GPU"),
        (lambda: coll.lookup(ids, off, np.ones(5, np.float32)), hb.HbDeviceError, "weights: host memory"),
        (lambda: coll.lookup(ids, off, out=np.zeros((2, 2), np.float32), unpooled=f32(6), host_offsets=OFFSETS),
         hb.HbDeviceError, "out: host memory"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2), unpooled=np.zeros(6, np.float32), host_offsets=OFFSETS),
         hb.HbDeviceError, "unpooled: host memory"),
        (lambda: coll.apply_gradients(ids, off, np.zeros((2, 2), np.float32), grad_unpooled=f32(6),
                                      host_offsets=OFFSETS), hb.HbDeviceError, "grad_out: host memory"),
        (lambda: coll.lookup(ids, off, unpooled=f32(6), host_offsets=OFFSETS), hb.HbValueError,
         r"out: a GPU collection writes into a CUDA array you pass \(2 x 2 float32\); hb allocates no device"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2)), hb.HbValueError,
         "host_offsets: this GPU collection has pooling-NONE features; pass a host copy of offsets"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2), host_offsets=OFFSETS), hb.HbValueError,
         r"unpooled: a GPU collection writes the pooling-NONE rows into a CUDA array you pass \(6 float32\)"),
        (lambda: coll.lookup(ids, off, out=f32(2, 3), unpooled=f32(6), host_offsets=OFFSETS), hb.HbValueError,
         "out: needs 2 x 2 elements, the array has 6"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2), unpooled=f32(5), host_offsets=OFFSETS), hb.HbValueError,
         "unpooled: needs 6 elements, the array has 5"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2), unpooled=f32(6), host_offsets=OFFSETS[:3]),
         hb.HbValueError, "host_offsets: 3 entries, offsets has 5"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2), unpooled=f32(6), host_offsets=FakeCuda((5,), "<i8")),
         hb.HbDeviceError, "host_offsets: a CUDA array"),
        (lambda: coll.lookup(i64(4), off, out=f32(2, 2), unpooled=f32(6), host_offsets=OFFSETS),
         hb.HbValueError, "values: offsets end at 5, values has 4"),
        (lambda: coll.lookup(ids, i64(4), out=f32(2, 2)), hb.HbValueError, "offsets: expected num_features"),
        (lambda: coll.lookup(FakeCuda((5,), "<i4"), off), hb.HbTypeError, "expected a CUDA array of dtype int64"),
        (lambda: coll.lookup(ids, off, out=f32(2, 2), unpooled=FakeCuda((6,), readonly=True),
                             host_offsets=OFFSETS), hb.HbValueError, "unpooled: the CUDA array is read-only"),
        (lambda: coll.apply_gradients(ids, off, f32(2, 2), host_offsets=OFFSETS), hb.HbValueError,
         "grad_unpooled: the collection has pooling-NONE features; pass their rows"),
    ]
    for call, cls, match in cases:
        with pytest.raises(cls, match=match):
            call()
    assert coll.stats()["lookups"] == 0 and coll.stats()["updates"] == 0
    coll.device = -1
    coll.close(), a.close(), b.close()


def test_capi_collection_calls_take_device_pointers_only_in_the_split_wrappers(ctx):
    """hb.i's flat hb_collection_lookup reads offsets on the host (to split
    the unpooled rows): it never gets a device pointer. hbpy_collection_*
    (the split passed in host memory) pass them through: a NULL collection
    shows the call reached C, which refuses it, not the typemap."""
    d64, d32 = _device.device_array(FakeCuda((5,), "<i8"), "values"), _device.device_array(FakeCuda((4,)), "out")
    with pytest.raises(hb.HbDeviceError, match="values: CUDA device memory, but hb_collection_lookup takes host"):
        hb.capi.hb_collection_lookup(0, 2, d64, d64, None, d32, None)
    with pytest.raises(hb.HbDeviceError, match="hb_collection_apply_gradients takes host memory only"):
        hb.capi.hb_collection_apply_gradients(0, 2, d64, d64, None, d32, None)
    with pytest.raises(hb.HbDeviceError, match="row_starts: CUDA device memory"):
        hb.capi.hbpy_collection_lookup(0, 2, d64, d64, None, d32, d32, d64)
    calls = (lambda: hb.capi.hbpy_collection_lookup(0, 2, d64, d64, d32, d32, d32, np.zeros(2, np.int64)),
             lambda: hb.capi.hbpy_collection_apply_gradients(0, 2, d64, d64, d32, d32, d32, None))
    for call in calls:
        with pytest.raises(hb.HbError) as info:
            call()
        assert not isinstance(info.value, hb.HbDeviceError) and info.value.status == hb.ERR_INVALID_ARGUMENT
        assert "hb_collection_" in info.value.message


# ---- Tables -------------------------------------------------------------------------------

def test_device_option_of_tables(ctx):
    assert [hb._device_index(d, ctx) for d in (None, "cpu", -1, 0, 3, "cuda:2")] == [-1, -1, -1, 0, 3, 2]
    for bad in ("gpu", "cuda:x", -2, True, 1.5):
        with pytest.raises(hb.HbValueError, match="pass 'cpu', 'cuda', 'cuda:N'"):
            hb._device_index(bad, ctx)
    if ctx.device.startswith("cuda:"):
        assert hb._device_index("cuda", ctx) == int(ctx.device[5:])
    else:
        with pytest.raises(hb.HbValueError, match="context's device is 'cpu"):
            hb._device_index("cuda", ctx)
    with hb.Embedding(ctx, "cpu_t", 2, device="cpu") as t:
        assert t.device == -1


def test_gpu_table_without_cuda_is_unsupported(ctx):
    no_gpu(ctx)
    with pytest.raises(hb.HbError) as info:
        hb.Embedding(ctx, "gpu_t", 2, num_rows=4, device="cuda:0")
    assert info.value.status == hb.ERR_UNSUPPORTED


# ---- On a GPU (CuPy) -----------------------------------------------------------------------

def cupy_or_skip(ctx):
    try:
        import cupy
    except ImportError:
        pytest.skip("CuPy is not installed: the CuPy GPU tests run where it is")
    if ctx.num_gpus <= 0:
        pytest.skip("hb sees no CUDA device (%s)" % hb.build_info())
    return cupy


def test_cupy_allreduce_and_gpu_table_equal_host(ctx):
    cp = cupy_or_skip(ctx)
    ctx.set_cuda_stream(cp.cuda.get_current_stream().ptr)
    x = cp.arange(6, dtype=cp.float32)
    out = cp.empty_like(x)
    assert ctx.allreduce(x, recv=out) is out
    ctx.synchronize()
    assert cp.asnumpy(out).tolist() == list(range(6))
    cfg = dict(num_rows=16, initializer="normal", init_b=0.5, seed=3, optimizer="adagrad", learning_rate=0.1)
    ids = np.array([3, 1, 3, 15], np.int64)
    grads = np.linspace(-1, 1, 4 * 5, dtype=np.float32).reshape(4, 5)
    with hb.Embedding(ctx, "h", 5, **cfg) as host, hb.Embedding(ctx, "g", 5, device="cuda", **cfg) as gpu:
        with pytest.raises(hb.HbDeviceError, match="GPU"):
            gpu.lookup(ids)
        with pytest.raises(hb.HbValueError, match="hb allocates no device memory"):
            gpu.lookup(cp.asarray(ids))
        d_out = cp.empty((4, 5), cp.float32)
        gpu.lookup(cp.asarray(ids), out=d_out)
        ctx.synchronize()
        assert np.array_equal(cp.asnumpy(d_out), host.lookup(ids))
        host.apply_gradients(ids, grads)
        gpu.apply_gradients(cp.asarray(ids), cp.asarray(grads))
        gpu.lookup(cp.asarray(ids), out=d_out)
        ctx.synchronize()
        assert np.array_equal(cp.asnumpy(d_out), host.lookup(ids))
