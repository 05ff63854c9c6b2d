#!/usr/bin/env python3
"""DLPack interop with real producers and consumers, through the Go test
library built from internal/dlpacktest/cshared (-buildmode=c-shared) and
loaded with ctypes.

    interop.py numpy LIB     CPU: NumPy reads Go's tensors, Go reads NumPy's.
                             Run by `go test ./dlpack` (TestNumPyInterop).
    interop.py gpu [LIB]     GPU: PyTorch and CuPy read Go's device tensors,
                             Go reads theirs, on every CUDA device. LIB
                             defaults to libdlpacktest.so beside this script.

Every check is an assert; the last line printed is "OK: ..." on success.
"""

import ctypes
import gc
import os
import sys

c_int, c_int64, c_double, c_void_p, c_char_p = (
    ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_char_p)

# Capsule names: PyCapsule_New keeps the pointer, so these live as long as
# the module.
DLTENSOR = b"dltensor"
USED = b"used_dltensor"

KDL_CPU, KDL_CUDA = 1, 2
CODES = {"i": 0, "u": 1, "f": 2, "c": 5}
INFO_LEN, INFO_SHAPE, INFO_STRIDES = 24, 8, 16


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(c_int64)),
                ("strides", ctypes.POINTER(c_int64)), ("byte_offset", ctypes.c_uint64)]


api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
api.PyCapsule_GetPointer.restype = c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
api.PyCapsule_SetName.restype = c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
api.PyCapsule_GetName.restype = c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
# The same two functions on the raw PyObject* a capsule destructor receives.
raw_is_valid = ctypes.PYFUNCTYPE(c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", api))
raw_get_pointer = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", api))

lib = None


def load(path):
    global lib
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.dlpt_export_host.restype = c_void_p
    lib.dlpt_export_host.argtypes = [c_int, c_int, c_int64, c_int64, c_int, c_double, c_double]
    lib.dlpt_export_cuda.restype = c_void_p
    lib.dlpt_export_cuda.argtypes = [c_int, c_int64, c_int64, c_double, c_double]
    lib.dlpt_import.restype = c_int64
    lib.dlpt_import.argtypes = [c_void_p, ctypes.POINTER(c_double), c_int64, ctypes.POINTER(c_int64)]
    lib.dlpt_released.restype = c_int64
    lib.dlpt_live.restype = c_int64
    lib.dlpt_call_deleter.argtypes = [c_void_p]
    lib.dlpt_call_deleter.restype = None
    lib.dlpt_last_error.argtypes = [c_char_p, c_int]
    lib.dlpt_last_error.restype = c_int
    lib.dlpt_cuda_init.argtypes = [c_char_p]
    lib.dlpt_cuda_init.restype = c_int


def last_error():
    buf = ctypes.create_string_buffer(4096)
    lib.dlpt_last_error(buf, len(buf))
    return buf.value.decode()


@ctypes.CFUNCTYPE(None, c_void_p)
def capsule_destructor(cap):
    # A producer's duty: a capsule nobody consumed still owns its tensor.
    if raw_is_valid(cap, DLTENSOR):
        lib.dlpt_call_deleter(raw_get_pointer(cap, DLTENSOR))


def new_capsule(ptr):
    return api.PyCapsule_New(ptr, DLTENSOR, ctypes.cast(capsule_destructor, c_void_p))


def tensor_of(ptr):
    return DLTensor.from_address(ptr)


class Producer:
    """The DLPack protocol around one exported DLManagedTensor*."""

    def __init__(self, ptr, device):
        self.ptr, self.device = ptr, device

    def __dlpack__(self, stream=None, **kwargs):  # max_version, dl_device, copy: a legacy capsule serves all
        assert self.ptr, "__dlpack__ called twice"
        ptr, self.ptr = self.ptr, None
        return new_capsule(ptr)

    def __dlpack_device__(self):
        return self.device


class Released:
    """Checks that a block of code releases exactly n exports."""

    def __init__(self, n, what):
        self.n, self.what = n, what

    def __enter__(self):
        self.before = lib.dlpt_released()

    def __exit__(self, *exc):
        if exc[0] is None:
            gc.collect()
            got = lib.dlpt_released() - self.before
            assert got == self.n, "%s: deleter ran %d times, want %d" % (self.what, got, self.n)


def import_capsule(cap, n):
    """Hands the capsule's tensor to Go, which reads it and closes it."""
    ptr = api.PyCapsule_GetPointer(cap, DLTENSOR)
    out = (c_double * max(n, 1))()
    info = (c_int64 * INFO_LEN)()
    got = lib.dlpt_import(ptr, out, n, info)
    if got != -1:  # taken over: the capsule must not delete it again
        api.PyCapsule_SetName(cap, USED)
    if got < 0:
        raise ValueError(last_error())
    return list(out[:got]), list(info)


def check_info(info, device_type, device_id, shape, strides):
    ndim = len(shape)
    assert info[0] == device_type and info[1] == device_id, "device %s" % info[:2]
    assert info[2] == ndim, "ndim %d" % info[2]
    assert info[INFO_SHAPE:INFO_SHAPE + ndim] == list(shape), "shape %s" % info[INFO_SHAPE:INFO_SHAPE + ndim]
    assert info[INFO_STRIDES:INFO_STRIDES + ndim] == list(strides), "strides %s, want %s" % (
        info[INFO_STRIDES:INFO_STRIDES + ndim], list(strides))


def run_numpy():
    import numpy as np

    exports = 0
    # Go -> NumPy, every Go element type, row- and column-major, empty.
    kinds = [("float16", -2.5, 0.5), ("float32", -2.5, 0.5), ("float64", -2.5, 0.25),
             ("int8", -6, 1), ("int16", -6, 3), ("int32", -6, 1000), ("int64", -6, 1e12),
             ("uint8", 0, 1), ("uint16", 0, 7), ("uint32", 0, 1e6), ("uint64", 0, 1e15)]
    for name, start, step in kinds:
        dt = np.dtype(name)
        for rows, cols, col_major in [(3, 4, False), (3, 4, True), (0, 5, False), (1, 1, True)]:
            what = "%s %dx%d%s" % (name, rows, cols, " col-major" if col_major else "")
            ptr = lib.dlpt_export_host(CODES[dt.kind], dt.itemsize * 8, rows, cols, int(col_major), start, step)
            assert ptr, "export %s: %s" % (what, last_error())
            exports += 1
            data = tensor_of(ptr).data
            with Released(1, what):
                arr = np.from_dlpack(Producer(ptr, (KDL_CPU, 0)))
                want = (start + step * np.arange(rows * cols, dtype=np.float64)).astype(dt).reshape(rows, cols)
                assert arr.dtype == dt and arr.shape == (rows, cols), "%s: %s %s" % (what, arr.dtype, arr.shape)
                assert np.array_equal(arr, want), "%s: %s != %s" % (what, arr, want)
                if rows * cols > 1:
                    assert arr.ctypes.data == data, "%s: copied" % what
                    assert arr.flags.f_contiguous == col_major, "%s: layout" % what
                del arr
    # A capsule nobody consumes: its destructor calls the deleter, once.
    with Released(1, "unconsumed capsule"):
        ptr = lib.dlpt_export_host(2, 32, 2, 2, 0, 0, 1)
        exports += 1
        cap = Producer(ptr, (KDL_CPU, 0)).__dlpack__()
        del cap
    assert lib.dlpt_released() == exports and lib.dlpt_live() == 0, "released %d of %d, %d live" % (
        lib.dlpt_released(), exports, lib.dlpt_live())

    # NumPy -> Go: NumPy's own capsules, every layout; NumPy's deleter (which
    # drops the capsule's reference to the array) must run when Go closes.
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    arrays = [
        ("float32 row-major", lambda: np.arange(12, dtype=np.float32).reshape(3, 4)),
        ("float32 strided", lambda: base[:, ::2]),
        ("float32 col-major", lambda: base.T),
        ("float32 reversed", lambda: base[::-1, ::-1]),
        ("float32 offset view", lambda: base[1:3, 2:5]),
        ("float16", lambda: (np.arange(10) / 4).astype(np.float16)),
        ("float64 3-d", lambda: np.linspace(-1, 1, 24).reshape(2, 3, 4)),
        ("int8", lambda: np.arange(-5, 5, dtype=np.int8)),
        ("int64", lambda: np.arange(6, dtype=np.int64) * 10**12),
        ("uint16", lambda: np.arange(7, dtype=np.uint16) * 1000),
        ("uint64 fortran", lambda: np.asfortranarray(np.arange(6, dtype=np.uint64).reshape(2, 3))),
        ("empty", lambda: np.zeros((0, 3), dtype=np.float32)),
    ]
    for what, make in arrays:
        arr = make()
        refs = sys.getrefcount(arr)
        cap = arr.__dlpack__()
        assert sys.getrefcount(arr) == refs + 1, "%s: the capsule holds no reference" % what
        vals, info = import_capsule(cap, arr.size)
        assert sys.getrefcount(arr) == refs, "%s: NumPy's deleter did not run" % what
        del cap
        assert sys.getrefcount(arr) == refs, "%s: NumPy's deleter ran twice" % what
        assert vals == arr.astype(np.float64).ravel().tolist(), "%s: %s != %s" % (what, vals, arr.ravel())
        check_info(info, KDL_CPU, 0, arr.shape, [s // arr.itemsize for s in arr.strides] if arr.size else info[INFO_STRIDES:INFO_STRIDES + arr.ndim])
        assert info[4] == CODES[arr.dtype.kind] and info[5] == arr.itemsize * 8, "%s: dtype %s" % (what, info[4:6])

    # Imported but unreadable by the test library: taken over all the same.
    arr = np.arange(4, dtype=np.complex64)
    refs = sys.getrefcount(arr)
    cap = arr.__dlpack__()
    try:
        import_capsule(cap, 4)
        raise AssertionError("complex64 read")
    except ValueError as e:
        assert "cannot read complex64" in str(e), e
    assert sys.getrefcount(arr) == refs, "complex64: NumPy's deleter did not run"
    del cap

    # Refused by validation: nothing taken over, the capsule still owns it.
    arr = np.arange(4, dtype=np.float32)
    refs = sys.getrefcount(arr)
    cap = arr.__dlpack__()
    t = tensor_of(api.PyCapsule_GetPointer(cap, DLTENSOR))
    t.ndim = -1
    try:
        import_capsule(cap, 4)
        raise AssertionError("ndim -1 imported")
    except ValueError as e:
        assert "ndim = -1" in str(e), e
    assert sys.getrefcount(arr) == refs + 1 and api.PyCapsule_GetName(cap) == DLTENSOR, "refused import consumed the capsule"
    t.ndim = 1
    del t, cap
    assert sys.getrefcount(arr) == refs, "capsule destructor did not delete"
    print("OK: numpy %s: %d exports read and released once each, %d NumPy capsules imported and released" % (
        np.__version__, exports, len(arrays) + 1))


def open_cuda():
    names = [os.environ.get("DLPT_CUDART", ""), "libcudart.so.13", "libcudart.so"]
    errors = []
    for name in filter(None, names):
        n = lib.dlpt_cuda_init(name.encode())
        if n >= 0:
            return n
        errors.append("%s: %s" % (name, last_error()))
    raise SystemExit("cannot open the CUDA runtime: " + "; ".join(errors))


def run_gpu():
    import numpy as np
    import torch  # loads libcudart.so.13, which dlopen then finds by name
    import cupy

    ndev = open_cuda()
    assert ndev > 0, "no CUDA device"
    print("torch %s, cupy %s, %d device(s)" % (torch.__version__, cupy.__version__, ndev))
    want = (0.5 + np.arange(12, dtype=np.float64)).reshape(3, 4)
    exports = 0
    for dev in range(ndev):
        # PyTorch exports a tensor only from its own device's context
        # ("Can't export tensors on a different CUDA device index").
        torch.cuda.set_device(dev)
        # Go -> PyTorch, through the protocol and through a bare capsule.
        for how in ("torch.from_dlpack", "torch.utils.dlpack.from_dlpack(capsule)"):
            with Released(1, "%s cuda:%d" % (how, dev)):
                ptr = lib.dlpt_export_cuda(dev, 3, 4, 0.5, 1.0)
                assert ptr, last_error()
                exports += 1
                data = tensor_of(ptr).data
                if how == "torch.from_dlpack":
                    t = torch.from_dlpack(Producer(ptr, (KDL_CUDA, dev)))
                else:
                    t = torch.utils.dlpack.from_dlpack(new_capsule(ptr))
                assert t.device == torch.device("cuda", dev), "%s: device %s" % (how, t.device)
                assert t.dtype == torch.float32 and tuple(t.shape) == (3, 4) and t.data_ptr() == data, how
                assert np.array_equal(t.cpu().numpy(), want), "%s: %s" % (how, t)
                del t
                torch.cuda.synchronize(dev)
        # Go -> CuPy.
        with Released(1, "cupy.from_dlpack cuda:%d" % dev):
            ptr = lib.dlpt_export_cuda(dev, 3, 4, 0.5, 1.0)
            assert ptr, last_error()
            exports += 1
            data = tensor_of(ptr).data
            with cupy.cuda.Device(dev):
                x = cupy.from_dlpack(Producer(ptr, (KDL_CUDA, dev)))
                assert x.device.id == dev and x.dtype == cupy.float32 and x.shape == (3, 4) and x.data.ptr == data
                assert np.array_equal(cupy.asnumpy(x), want), x
                del x
                cupy.cuda.Device(dev).synchronize()
        # A capsule nobody consumes.
        with Released(1, "unconsumed capsule cuda:%d" % dev):
            cap = Producer(lib.dlpt_export_cuda(dev, 2, 2, 0, 1), (KDL_CUDA, dev)).__dlpack__()
            exports += 1
            del cap

        # PyTorch -> Go: the deleter must free torch's memory.
        torch_cases = [
            ("float32", lambda: torch.arange(1 << 20, dtype=torch.float32, device=dev).reshape(1024, 1024)),
            ("float32 strided", lambda: torch.arange(1 << 20, dtype=torch.float32, device=dev).reshape(1024, 1024)[:, ::2]),
            ("float32 transposed", lambda: torch.arange(1 << 20, dtype=torch.float32, device=dev).reshape(1024, 1024).t()),
            ("float16", lambda: (torch.arange(4096, device=dev) / 8).to(torch.float16)),
            ("int64", lambda: torch.arange(-1000, 1000, dtype=torch.int64, device=dev) * 3),
            ("uint8", lambda: torch.arange(256, device=dev).to(torch.uint8)),
        ]
        for what, make in torch_cases:
            t = make()
            expect = t.cpu().double().flatten().tolist()
            shape, strides = tuple(t.shape), t.stride()
            nbytes = t.untyped_storage().nbytes()
            cap = t.__dlpack__()
            del t
            torch.cuda.synchronize(dev)
            before = torch.cuda.memory_allocated(dev)
            vals, info = import_capsule(cap, len(expect))
            after = torch.cuda.memory_allocated(dev)
            del cap
            assert vals == expect, "torch %s: values differ" % what
            check_info(info, KDL_CUDA, dev, shape, strides)
            assert info[6] == dev, "torch %s: data on device %d, tensor says %d" % (what, info[6], dev)
            assert before - after >= nbytes, "torch %s: deleter freed %d of %d bytes" % (what, before - after, nbytes)

        # CuPy -> Go.
        pool = cupy.get_default_memory_pool()
        with cupy.cuda.Device(dev):
            cupy_cases = [
                ("float32", lambda: cupy.arange(1 << 20, dtype=cupy.float32).reshape(1024, 1024)),
                ("float32 strided", lambda: cupy.arange(1 << 20, dtype=cupy.float32).reshape(1024, 1024)[::2, 1::3]),
                ("float16 fortran", lambda: cupy.asfortranarray((cupy.arange(4096) / 8).astype(cupy.float16).reshape(64, 64))),
                ("int32", lambda: cupy.arange(-5000, 5000, dtype=cupy.int32)),
            ]
            for what, make in cupy_cases:
                x = make()
                expect = cupy.asnumpy(x).astype(np.float64).ravel().tolist()
                shape, strides = x.shape, [s // x.itemsize for s in x.strides]
                nbytes = x.data.mem.size
                cap = x.__dlpack__()
                del x
                cupy.cuda.Device(dev).synchronize()
                before = pool.used_bytes()
                vals, info = import_capsule(cap, len(expect))
                after = pool.used_bytes()
                del cap
                assert vals == expect, "cupy %s: values differ" % what
                check_info(info, KDL_CUDA, dev, shape, strides)
                assert info[6] == dev, "cupy %s: data on device %d" % (what, info[6])
                assert before - after >= nbytes, "cupy %s: deleter freed %d of %d bytes" % (what, before - after, nbytes)
        print("cuda:%d: exports read by torch and cupy, %d torch and %d cupy tensors imported" % (
            dev, len(torch_cases), len(cupy_cases)))
    gc.collect()
    assert lib.dlpt_released() == exports and lib.dlpt_live() == 0, "released %d of %d, %d live" % (
        lib.dlpt_released(), exports, lib.dlpt_live())
    print("OK: gpu: %d exports released once each on %d device(s)" % (exports, ndev))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("numpy", "gpu"):
        raise SystemExit(__doc__)
    mode = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "libdlpacktest.so")
    load(path)
    run_numpy() if mode == "numpy" else run_gpu()


if __name__ == "__main__":
    main()
