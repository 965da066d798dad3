"""Contexts, errors and the array adapter: how a NumPy, PyTorch or CuPy array
becomes a tally_view on the right context without a copy.

Rules (docs/python.md):
- Host arrays (NumPy, CPU torch tensors) run on a host or OpenCL context. On a
  context whose device shares memory with the host (the host backend, PoCL's
  CPU device) they are wrapped in place with tally_buffer_wrap_host; on other
  devices (a GPU's OpenCL, CUDA) they are uploaded to a buffer and the outputs
  downloaded, because the device cannot read host memory.
- CUDA arrays (torch, CuPy) are wrapped in place with tally_buffer_wrap_cuda on
  a context for their device and the caller's current stream, so tally's work
  is ordered after the kernels that wrote them and before those that read the
  outputs, with no synchronisation.
- A 2-D operand must have contiguous rows (unit column stride); the row stride
  may be anything >= the row length, and is passed to the library as the
  view's stride. Anything else is refused, never copied behind the caller's
  back.
"""

import ctypes
import os
import threading

import numpy as np

from . import _lib
from ._lib import lib, View

__all__ = ["TallyError", "Context", "default_context", "devices", "Device"]

_F32, _U32, _I32, _BF16, _F16 = 1, 2, 3, 4, 5
# The element types of floating inputs, by the name NumPy (ml_dtypes for
# bfloat16), torch and CuPy give them. Halves are read in place and widened
# exactly inside the op (docs/ops.md); outputs stay float32.
_FLOAT_INPUTS = ("float32", "bfloat16", "float16")
_INPUT_DTYPE = {"float32": _F32, "bfloat16": _BF16, "float16": _F16}
_BACKENDS = {"auto": 0, "cuda": 1, "opencl": 2, "host": 3}
_BACKEND_NAMES = {v: k for k, v in _BACKENDS.items()}
_INVALID_ARGUMENT = 1


class TallyError(RuntimeError):
    """A status other than OK from libtally.

    ``status`` is the status's name ("SHAPE_MISMATCH"), ``code`` its number and
    ``message`` the library's one-line detail (tally_last_error).
    """

    def __init__(self, code, message):
        self.code = int(code)
        self.status = _lib.STATUS_NAMES.get(self.code, "UNKNOWN")
        self.message = message
        super().__init__(f"{self.status}: {message}" if message else self.status)


def _check(code, handle=None):
    if code != 0:
        msg = lib.tally_last_error(handle)
        raise TallyError(code, msg.decode(errors="replace") if msg else "")


def _stream_handle(stream):
    """A CUstream as an int from an int, a torch.cuda.Stream or a CuPy stream."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise TypeError("stream must be an int (a CUstream) or a torch / CuPy stream object")
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"stream must be an int (a CUstream) or a torch / CuPy stream object, not "
                    f"{type(stream).__name__}")


class Context:
    """A tally context: one device of one backend (tally_context_create).

    backend is "auto", "cuda", "opencl" or "host"; device an index (None: the
    default device, or TALLY_DEVICE). With ``stream`` (CUDA only: an int
    CUstream, 0 being the legacy default stream, or a torch / CuPy stream
    object) the context runs on the device's primary context and enqueues on
    exactly that stream (tally_context_create_cuda).

    A context may be used from several Python threads: calls on one context
    are serialised by a lock. close() (or the end of a ``with`` block) releases
    it; it is also released when garbage-collected.
    """

    def __init__(self, backend="auto", device=None, *, stream=None):
        if not isinstance(backend, str):
            raise TypeError(f"backend must be a str, not {type(backend).__name__}")
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_BACKENDS)}, not {backend!r}")
        if device is not None and (isinstance(device, bool) or not isinstance(device, int)):
            raise TypeError(f"device must be an int or None, not {type(device).__name__}")
        self._handle = None
        self._lock = threading.RLock()
        self._shares_host = None
        handle = ctypes.c_void_p()
        stream_value = _stream_handle(stream)
        if stream_value is not None:
            if backend != "cuda":
                raise ValueError("stream= is for backend='cuda' only")
            self.device = 0 if device is None else device
            _check(lib.tally_context_create_cuda(self.device, ctypes.c_void_p(stream_value),
                                                 ctypes.byref(handle)))
        else:
            self.device = device
            _check(lib.tally_context_create(_BACKENDS[backend], -1 if device is None else device,
                                            ctypes.byref(handle)))
        self._handle = handle.value
        self.stream = stream_value
        self.backend = _BACKEND_NAMES[lib.tally_context_backend(self._handle)]
        self.device_name = lib.tally_context_device_name(self._handle).decode(errors="replace")

    def __repr__(self):
        state = "closed" if self._handle is None else self.device_name
        extra = "" if self.stream is None else f", stream={self.stream:#x}"
        return f"tally.Context({self.backend!r}, {state!r}{extra})"

    def _get(self):
        if self._handle is None:
            raise ValueError("this tally.Context is closed")
        return self._handle

    def sync(self):
        """Waits until all work queued on the context has finished."""
        with self._lock:
            _check(lib.tally_sync(self._get()), self._handle)

    def close(self):
        """Releases the context (waits for its queued work). Idempotent."""
        with self._lock:
            if self._handle is not None:
                lib.tally_context_release(self._handle)
                self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_cached", False):
            return
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def shares_host_memory(self):
        """True when host arrays are used in place (tally_buffer_wrap_host works)."""
        if self._shares_host is None:
            with self._lock:
                probe = np.zeros(4, np.float32)
                buf = ctypes.c_void_p()
                st = lib.tally_buffer_wrap_host(self._get(), probe.ctypes.data, probe.nbytes,
                                                ctypes.byref(buf))
                if st == 0:
                    lib.tally_buffer_release(buf)
                    self._shares_host = True
                elif st == _INVALID_ARGUMENT:
                    self._shares_host = False
                else:
                    _check(st, self._handle)
        return self._shares_host


_default = {"pid": None, "ctx": None}
_default_lock = threading.Lock()


def default_context():
    """The process's default context: AUTO backend and device, which honour
    TALLY_BACKEND and TALLY_DEVICE. Created on first use (and anew in a forked
    child, which must not use its parent's device handles)."""
    with _default_lock:
        if _default["ctx"] is None or _default["pid"] != os.getpid():
            _default["ctx"] = Context("auto")
            _default["pid"] = os.getpid()
        return _default["ctx"]


# Contexts for CUDA arrays, one per (device, stream): creating one loads the
# module, so they are kept for the life of the process (never released at
# exit, when the CUDA driver may already be shutting down).
_cuda_contexts = {}
_cuda_lock = threading.Lock()


def _cuda_context(device, stream):
    key = (os.getpid(), device, stream)
    with _cuda_lock:
        ctx = _cuda_contexts.get(key)
        if ctx is None:
            ctx = Context("cuda", device, stream=stream)
            ctx._cached = True
            _cuda_contexts[key] = ctx
        return ctx


class Device(tuple):
    """One device as `tally info` lists it: (backend, index, name, platform, is_gpu)."""

    __slots__ = ()
    _fields = ("backend", "index", "name", "platform", "is_gpu")

    def __new__(cls, backend, index, name, platform, is_gpu):
        return tuple.__new__(cls, (backend, index, name, platform, is_gpu))

    backend = property(lambda self: self[0])
    index = property(lambda self: self[1])
    name = property(lambda self: self[2])
    platform = property(lambda self: self[3])
    is_gpu = property(lambda self: self[4])

    def __repr__(self):
        return ("Device(backend={!r}, index={!r}, name={!r}, platform={!r}, is_gpu={!r})"
                .format(*self))


def devices(backend=None):
    """The devices every compiled backend can see (or one backend's), as
    Device tuples, in the order `tally info` lists them. A backend that is
    compiled out, lacks its vendor library or has no device lists nothing."""
    names = ["cuda", "opencl", "host"] if backend is None else [backend]
    found = []
    for name in names:
        if name not in _BACKENDS or name == "auto":
            raise ValueError(f"backend must be 'cuda', 'opencl' or 'host', not {name!r}")
        count = ctypes.c_int(0)
        st = lib.tally_devices(_BACKENDS[name], None, 0, ctypes.byref(count))
        if st != 0 or count.value == 0:
            continue
        arr = (_lib.DeviceInfo * count.value)()
        st = lib.tally_devices(_BACKENDS[name], arr, count.value, ctypes.byref(count))
        if st != 0:
            continue
        for d in arr[:count.value]:
            found.append(Device(name, d.index, d.name.decode(errors="replace"),
                                d.platform.decode(errors="replace"), bool(d.is_gpu)))
    return found


# ---------------------------------------------------------------------------
# Operands
# ---------------------------------------------------------------------------

class _Operand:
    """One array argument, described without copying it.

    kind: "host" (NumPy or CPU torch) or "cuda" (torch or CuPy on a GPU).
    flavour: "numpy", "torch" or "cupy", the kind of array outputs are made as.
    """

    __slots__ = ("name", "obj", "kind", "flavour", "ptr", "shape", "strides", "dtype",
                 "itemsize", "device")

    def rows_view(self, dims):
        """(rows, cols, stride) of the 2-D view over this operand. dims is the
        number of trailing dimensions folded into a row (2 for gmm's
        [B, K, D] parameters, else 1)."""
        shape, strides = self.shape, self.strides
        if len(shape) == 0:
            raise ValueError(f"{self.name} is a 0-d array; tally takes 1-D or 2-D arrays")
        if len(shape) > dims + 1:
            raise ValueError(f"{self.name} has {len(shape)} dimensions; tally takes at most {dims + 1} here")
        if len(shape) == dims:  # a 1-D (or [K, D]) array is one row
            shape, strides = (1,) + tuple(shape), (0,) + tuple(strides)
        rows = shape[0]
        cols = 1
        for s in shape[1:]:
            cols *= s
        # The folded trailing dimensions must be one contiguous run of elements.
        expect = 1
        for size, stride in reversed(list(zip(shape[1:], strides[1:]))):
            if size > 1 and stride != expect:
                raise ValueError(
                    f"{self.name}: its rows are not contiguous (element strides {tuple(self.strides)} for "
                    f"shape {tuple(self.shape)}); tally reads rows in place and never copies: pass "
                    f"a contiguous array (for example numpy.ascontiguousarray or tensor.contiguous())")
            expect *= size
        stride = strides[0] if rows > 1 else cols
        if rows > 1 and cols > 0 and stride < cols:
            raise ValueError(
                f"{self.name}: row stride {stride} is smaller than the row length {cols} "
                f"(negative, broadcast or overlapping rows); pass a contiguous array")
        return rows, cols, stride

    def span_elements(self, rows, cols, stride):
        if rows == 0 or cols == 0:
            return 0
        return (rows - 1) * stride + cols


_NP_DTYPE = {_F32: np.float32, _U32: np.uint32, _I32: np.int32}


def _torch():
    import sys
    return sys.modules.get("torch")


def _operand(name, x, accept=_FLOAT_INPUTS):
    """Describes array x (a NumPy array, a torch tensor, a CuPy array)."""
    op = _Operand()
    op.name = name
    op.obj = x
    torch = _torch()
    if isinstance(x, np.ndarray):
        _from_numpy(op, x, "numpy")
    elif torch is not None and isinstance(x, torch.Tensor):
        _from_torch(op, x, torch)
    elif type(x).__module__.split(".")[0] == "cupy" and hasattr(x, "__cuda_array_interface__"):
        _from_cai(op, x, "cupy")
    else:
        raise TypeError(f"{name} must be a NumPy array, a torch tensor or a CuPy array, not "
                        f"{type(x).__module__}.{type(x).__name__}")
    if op.dtype not in accept:
        raise TypeError(f"{name} has dtype {op.dtype}; tally's ops take {' or '.join(accept)} "
                        f"(convert explicitly, for example x.astype(numpy.float32))")
    return op


def _from_numpy(op, x, flavour):
    op.kind, op.flavour = "host", flavour
    op.dtype = str(x.dtype) if x.dtype.isnative or x.dtype.itemsize == 1 else f"{x.dtype} (byte-swapped)"
    op.itemsize = x.itemsize
    op.shape = x.shape
    if any(s % x.itemsize for s in x.strides):
        raise ValueError(f"{op.name}: strides {x.strides} are not whole elements")
    op.strides = tuple(s // x.itemsize for s in x.strides)
    if x.size and not x.flags.aligned:
        raise ValueError(f"{op.name} is not aligned to its element size")
    op.ptr = x.ctypes.data if x.size else 0
    op.device = None


def _from_torch(op, x, torch):
    if x.layout != torch.strided:
        raise TypeError(f"{op.name} is a {x.layout} tensor; tally takes dense (strided) tensors")
    if x.is_complex() or x.is_quantized:
        raise TypeError(f"{op.name} has dtype {x.dtype}; tally's ops take float32")
    dev = x.device
    op.dtype = str(x.dtype).replace("torch.", "")
    op.itemsize = x.element_size()
    op.shape = tuple(x.shape)
    op.strides = tuple(x.stride())
    op.flavour = "torch"
    if dev.type == "cpu":
        op.kind = "host"
        op.device = None
    elif dev.type == "cuda":
        op.kind = "cuda"
        op.device = dev.index if dev.index is not None else torch.cuda.current_device()
    else:
        raise ValueError(f"{op.name} is on device {dev}; tally takes CPU and CUDA tensors")
    op.ptr = x.data_ptr() if x.numel() else 0
    if x.numel():
        # A tensor whose storage was resized away (freed) would point past its
        # memory: check the storage covers every element the view reaches.
        rows_like = sum((s - 1) * st for s, st in zip(op.shape, op.strides)) + 1
        storage = x.untyped_storage()
        need = (x.storage_offset() + rows_like) * op.itemsize
        if op.ptr == 0 or storage.nbytes() < need or any(st < 0 for st in op.strides):
            raise ValueError(f"{op.name}: the tensor's storage ({storage.nbytes()} bytes) does not hold its "
                             f"elements (freed or resized storage?)")


def _from_cai(op, x, flavour):
    cai = x.__cuda_array_interface__
    typestr = cai["typestr"]
    dt = np.dtype(typestr)
    op.flavour = flavour
    op.kind = "cuda"
    op.dtype = str(dt) if typestr[0] != ">" else f"{dt} (big-endian)"
    op.itemsize = dt.itemsize
    op.shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides, acc = [], 1
        for s in reversed(op.shape):
            strides.insert(0, acc)
            acc *= s
        op.strides = tuple(strides)
    else:
        if any(s % dt.itemsize for s in strides):
            raise ValueError(f"{op.name}: strides {strides} are not whole elements")
        op.strides = tuple(s // dt.itemsize for s in strides)
    op.ptr = cai["data"][0] or 0
    op.device = getattr(getattr(x, "device", None), "id", None)
    if op.device is None:
        raise TypeError(f"{op.name}: cannot tell which GPU holds this array")


def _current_stream(flavour, device):
    if flavour == "torch":
        torch = _torch()
        return torch.cuda.current_stream(device).cuda_stream
    import cupy
    with cupy.cuda.Device(device):
        return cupy.cuda.get_current_stream().ptr


class _Call:
    """One op call: picks the context, turns operands into views and makes the
    outputs; on exit releases buffers (and downloads outputs where the device
    does not share host memory)."""

    def __init__(self, ctx, operands):
        ops = [o for o in operands if o is not None]
        first = ops[0]
        kinds = {o.kind for o in ops}
        if len(kinds) > 1:
            raise TypeError("arrays of one call must all be on the host or all on one GPU; got "
                            + ", ".join(f"{o.name} ({o.flavour}, {o.kind})" for o in ops))
        self.kind = first.kind
        self.flavour = first.flavour
        self.buffers = []
        self.downloads = []
        if self.kind == "cuda":
            devs = {o.device for o in ops}
            if len(devs) > 1:
                raise ValueError("arrays are on different GPUs: "
                                 + ", ".join(f"{o.name} on cuda:{o.device}" for o in ops))
            self.device = first.device
            if ctx is None:
                ctx = _cuda_context(self.device, _current_stream(self.flavour, self.device))
            elif not isinstance(ctx, Context):
                raise TypeError(f"ctx must be a tally.Context, not {type(ctx).__name__}")
            elif ctx.backend != "cuda" or ctx.stream is None:
                raise ValueError(f"{first.name} is a CUDA array; it runs on a CUDA context made for a "
                                 f"stream (ctx=None, or tally.Context('cuda', device, stream=...)), "
                                 f"not on {ctx!r}")
            elif ctx.device != self.device:
                raise ValueError(f"{first.name} is on cuda:{self.device} but ctx is on cuda:{ctx.device}")
        else:
            if ctx is None:
                ctx = default_context()
            elif not isinstance(ctx, Context):
                raise TypeError(f"ctx must be a tally.Context, not {type(ctx).__name__}")
        self.ctx = ctx
        self.handle = ctx._get()
        self.in_place = self.kind == "cuda" or ctx.shares_host_memory()

    def __enter__(self):
        self.ctx._lock.acquire()
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                for buf, arr, nbytes in self.downloads:
                    if nbytes:
                        _check(lib.tally_buffer_download(buf, 0, ctypes.c_void_p(arr.ctypes.data), nbytes),
                               self.handle)
        finally:
            # Releasing a buffer waits for the work that uses it; on a
            # shared-memory OpenCL device that is when outputs hold results.
            for buf in self.buffers:
                lib.tally_buffer_release(buf)
            self.buffers = []
            self.ctx._lock.release()

    def _buffer(self, ptr, nbytes, upload):
        buf = ctypes.c_void_p()
        if self.kind == "cuda":
            _check(lib.tally_buffer_wrap_cuda(self.handle, ptr, nbytes, ctypes.byref(buf)), self.handle)
        elif self.in_place:
            _check(lib.tally_buffer_wrap_host(self.handle, ctypes.c_void_p(ptr or None), nbytes,
                                              ctypes.byref(buf)), self.handle)
        else:
            _check(lib.tally_buffer_create(self.handle, nbytes, ctypes.byref(buf)), self.handle)
            self.buffers.append(buf.value)
            if upload and nbytes:
                _check(lib.tally_buffer_upload(buf, 0, ctypes.c_void_p(ptr), nbytes), self.handle)
            return buf.value
        self.buffers.append(buf.value)
        return buf.value

    def view(self, op, dims=1):
        """The tally_view of an input operand."""
        if op is None:
            return View()
        rows, cols, stride = op.rows_view(dims)
        span = op.span_elements(rows, cols, stride)
        dtype = _INPUT_DTYPE.get(op.dtype, _F32)
        # Buffers start 4-byte aligned (tally_buffer_wrap_host/_cuda): a half
        # array that starts between two words (a slice x[1:]) is wrapped from
        # the word before, inside the same allocation, and viewed at element 1.
        offset = 0
        ptr = op.ptr
        if op.itemsize == 2 and ptr % 4:
            ptr -= 2
            offset = 1
        buf = self._buffer(ptr, (span + offset) * op.itemsize, upload=True)
        return View(buf, offset, rows, cols, stride, dtype)

    def output(self, shape, dtype=_F32):
        """A new contiguous output of the call's kind and its view (rows x cols
        from shape: () is 1x1, (n,) is n x 1, (r, c) is r x c)."""
        if len(shape) == 0:
            rows, cols = 1, 1
        elif len(shape) == 1:
            rows, cols = shape[0], 1
        else:
            rows, cols = shape
        n = rows * cols
        if self.kind == "host":
            arr = np.empty(shape, _NP_DTYPE[dtype])
            ptr = arr.ctypes.data if n else 0
            nbytes = n * 4
            buf = self._buffer(ptr, nbytes, upload=False)
            if not self.in_place:
                self.downloads.append((buf, arr, nbytes))
            if self.flavour == "torch":
                arr = _torch().from_numpy(arr)
        elif self.flavour == "torch":
            torch = _torch()
            tdt = {_F32: torch.float32, _U32: torch.uint32, _I32: torch.int32}[dtype]
            arr = torch.empty(shape, dtype=tdt, device=f"cuda:{self.device}")
            buf = self._buffer(arr.data_ptr() if n else 0, n * 4, upload=False)
        else:
            import cupy
            with cupy.cuda.Device(self.device):
                arr = cupy.empty(shape, dtype=_NP_DTYPE[dtype])
            buf = self._buffer(arr.data.ptr if n else 0, n * 4, upload=False)
        return arr, View(buf, 0, rows, cols, cols if rows > 1 else max(cols, 1), dtype)


def call(ctx, operands):
    return _Call(ctx, operands)


def check(code, c):
    _check(code, c.handle)
