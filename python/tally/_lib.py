"""ctypes declarations of libtally's public API (include/tally.h).

The package talks to the C library only through this module. The library is
the one installed inside the package by ``pip install .``, or the file named by
the TALLY_LIBRARY environment variable (for example a build tree's
``build/libtally.so``), which wins when set.
"""

import ctypes
import glob
import os

__all__ = ["lib", "library_path", "STATUS_NAMES", "DeviceInfo", "View", "Rng"]


def _find_library():
    env = os.environ.get("TALLY_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise ImportError(f"TALLY_LIBRARY={env!r} is not a file")
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    # meson installs the unversioned name inside the package; prefer it, then
    # any versioned file a hand-made layout may hold.
    for pattern in ("libtally.so", "libtally.dylib", "tally.dll", "libtally.so.*", "libtally.*.dylib"):
        hits = sorted(glob.glob(os.path.join(here, pattern)))
        if hits:
            return hits[0]
    raise ImportError(
        "libtally was not found inside the tally package (" + here + "); install the package "
        "with `python3 -m pip install .` at the repository root, or set TALLY_LIBRARY to a "
        "built libtally (for example build/libtally.so)")


library_path = _find_library()
lib = ctypes.CDLL(library_path)


class DeviceInfo(ctypes.Structure):
    _fields_ = [("index", ctypes.c_int), ("name", ctypes.c_char * 128),
                ("platform", ctypes.c_char * 128), ("is_gpu", ctypes.c_int)]


class View(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_void_p), ("offset", ctypes.c_int64), ("rows", ctypes.c_int64),
                ("cols", ctypes.c_int64), ("stride", ctypes.c_int64), ("dtype", ctypes.c_int)]


class Rng(ctypes.Structure):
    _fields_ = [("seed", ctypes.c_uint64), ("subsequence", ctypes.c_uint64),
                ("offset", ctypes.c_uint64)]


_c = ctypes
_vp = _c.c_void_p
_st = _c.c_int  # tally_status, and every other enum, is passed as int
_u64p = _c.POINTER(_c.c_uint64)

# name: (restype, argtypes). One row per public function the package uses.
_SIGNATURES = {
    "tally_version": (_c.c_uint, []),
    "tally_version_string": (_c.c_char_p, []),
    "tally_status_name": (_c.c_char_p, [_st]),
    "tally_status_string": (_c.c_char_p, [_st]),
    "tally_backend_name": (_c.c_char_p, [_st]),
    "tally_backend_compiled": (_c.c_int, [_st]),
    "tally_devices": (_st, [_st, _c.POINTER(DeviceInfo), _c.c_int, _c.POINTER(_c.c_int)]),
    "tally_context_create": (_st, [_st, _c.c_int, _c.POINTER(_vp)]),
    "tally_context_create_cuda": (_st, [_c.c_int, _vp, _c.POINTER(_vp)]),
    "tally_context_release": (None, [_vp]),
    "tally_context_backend": (_st, [_vp]),
    "tally_context_device_name": (_c.c_char_p, [_vp]),
    "tally_sync": (_st, [_vp]),
    "tally_last_error": (_c.c_char_p, [_vp]),
    "tally_buffer_create": (_st, [_vp, _c.c_size_t, _c.POINTER(_vp)]),
    "tally_buffer_wrap_cuda": (_st, [_vp, _c.c_uint64, _c.c_size_t, _c.POINTER(_vp)]),
    "tally_buffer_wrap_host": (_st, [_vp, _vp, _c.c_size_t, _c.POINTER(_vp)]),
    "tally_buffer_release": (None, [_vp]),
    "tally_buffer_upload": (_st, [_vp, _c.c_size_t, _vp, _c.c_size_t]),
    "tally_buffer_download": (_st, [_vp, _c.c_size_t, _vp, _c.c_size_t]),
    "tally_reduce": (_st, [_vp, _st, _st, View, View]),
    "tally_kl_div": (_st, [_vp, View, View, _st, _c.c_uint, View]),
    "tally_dirichlet_multinomial": (_st, [_vp, View, View, _st, _c.c_uint, View]),
    "tally_kl_div_backward": (_st, [_vp, View, View, View, _st, _c.c_uint, View, View]),
    "tally_dirichlet_multinomial_backward": (_st, [_vp, View, View, View, _st, _c.c_uint, View]),
    "tally_gmm_log_prob": (_st, [_vp, View, View, View, View, _c.c_int64, View]),
    "tally_gmm_log_prob_backward": (_st, [_vp, View, View, View, View, _c.c_int64, View, View, View, View, View]),
    "tally_gmm_sample_backward": (_st, [_vp, View, View, View, _c.c_int64, Rng, View, View, View, View, View]),
    "tally_gmm_sample": (_st, [_vp, View, View, View, _c.c_int64, Rng, View, View, View, _u64p]),
    "tally_rng_fill": (_st, [_vp, _st, Rng, View, _u64p]),
    "tally_categorical": (_st, [_vp, View, _c.c_uint, Rng, View, _u64p]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# Status code -> name ("SHAPE_MISMATCH"), read from the library itself so the
# two can never disagree. Codes are small and dense (tally.h's X-macro table).
STATUS_NAMES = {}
for _code in range(64):
    _n = lib.tally_status_name(_code)
    if _n and _n.decode() not in ("UNKNOWN", ""):
        STATUS_NAMES[_code] = _n.decode()
