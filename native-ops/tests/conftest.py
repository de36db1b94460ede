"""Loads the operator libraries into PyTorch once for the whole suite.

The libraries are looked up in $DJL_ATTN_LIB_DIR, else in the CMake build directories that the
Maven build and scripts/gpu-check.sh use. The CUDA library is loaded when PyTorch sees a GPU.
"""

import ctypes
import os
import pathlib

import pytest
import torch

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
CANDIDATE_DIRS = [
    os.environ.get("DJL_ATTN_LIB_DIR"),
    NATIVE_OPS / "build",
    NATIVE_OPS / "target" / "classes" / "io" / "djlattention" / "jni" / "linux-x86_64",
    # libdjl_attn_plans.so (plan tests only) stays in the CMake build directory.
    NATIVE_OPS / "target" / "cmake",
]


def _find(name):
    for d in CANDIDATE_DIRS:
        if d and (pathlib.Path(d) / name).is_file():
            return pathlib.Path(d) / name
    return None


def _load():
    cpu = _find("libdjl_attn.so")
    if cpu is None:
        raise RuntimeError(
            "libdjl_attn.so not found in %s: build native-ops first" % [str(d) for d in CANDIDATE_DIRS]
        )
    torch.ops.load_library(str(cpu))
    if torch.cuda.is_available():
        cuda = _find("libdjl_attn_cuda.so")
        if cuda is None:
            raise RuntimeError("a GPU is present but libdjl_attn_cuda.so was not built")
        torch.ops.load_library(str(cuda))


_load()


def supported_values(key):
    """A supported-values list of the kernels (djl_attn_supported_values of the C interface): the
    one list the operators check against, so the tests parametrise over what the library says."""
    lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
    lib.djl_attn_supported_values.restype = ctypes.c_char_p
    lib.djl_attn_supported_values.argtypes = [ctypes.c_char_p]
    value = lib.djl_attn_supported_values(key.encode())
    if value is None:
        raise KeyError(key)
    return value.decode().split(",")


def supported_ints(key):
    return [int(v) for v in supported_values(key)]


def _options_lib():
    lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
    lib.djl_attn_set_option.restype = ctypes.c_int32
    lib.djl_attn_set_option.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.djl_attn_get_option.restype = ctypes.c_char_p
    lib.djl_attn_get_option.argtypes = [ctypes.c_char_p]
    lib.djl_attn_last_error_message.restype = ctypes.c_char_p
    lib.djl_attn_option_errors.restype = ctypes.c_char_p
    return lib


def get_option(name):
    """The current value of a DJL_ATTN_* switch (docs/operators.md, "Switches"), or None when no
    loaded library declares it (the CUDA switches without a GPU)."""
    value = _options_lib().djl_attn_get_option(name.encode())
    return None if value is None else value.decode()


def option_values(name):
    """The values a switch takes in this build, the default first; None when no loaded library
    declares it. The tuning variants are there only in a DJL_ATTN_TUNING build."""
    lib = _options_lib()
    lib.djl_attn_option_values.restype = ctypes.c_char_p
    lib.djl_attn_option_values.argtypes = [ctypes.c_char_p]
    value = lib.djl_attn_option_values(name.encode())
    return None if value is None else value.decode().split(",")


def set_option(name, value):
    """Sets a switch in-process (they are read from the environment once, at load); raises
    ValueError with the library's message for an unknown name or value."""
    lib = _options_lib()
    if lib.djl_attn_set_option(name.encode(), value.encode()) != 0:
        raise ValueError(lib.djl_attn_last_error_message().decode())


class Options:
    """Sets switches for one test and restores them after it."""

    def __init__(self):
        self._saved = {}

    def set(self, name, value):
        if name not in self._saved:
            self._saved[name] = get_option(name)
        set_option(name, value)

    def unset(self, name):
        """Back to the default."""
        self.set(name, "")

    def restore(self):
        for name, value in self._saved.items():
            if value is not None:
                set_option(name, value)
        self._saved.clear()


@pytest.fixture
def options():
    opts = Options()
    yield opts
    opts.restore()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    # Fresh random inputs per test, reproducible per test id within a run.
    torch.manual_seed(hash(os.environ.get("PYTEST_CURRENT_TEST", "")) % (2**31))


# ---- CPU slices of GPU grids ------------------------------------------------------------------

def pytest_configure(config):
    for device in ("cpu", "cuda"):
        config.addinivalue_line(
            "markers",
            f"{device}_slice(predicate): on {device}, run only the cases whose parameters (the "
            "callspec's, a dict) the predicate accepts; the others are deselected at collection, "
            "not skipped")


def pytest_collection_modifyitems(config, items):
    """Deselects the cases a test's cpu_slice / cuda_slice markers leave out on that device:
    grids sized for the GPU's several kernels, of which the CPU's one kernel needs a slice (or,
    for a GPU-only property, none), and CPU-only grids (head dims no CUDA kernel takes).
    Deselected, they are neither run nor reported as skipped: nothing is hidden."""
    kept, dropped = [], []
    for item in items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        device = params.get("device")
        markers = item.iter_markers(f"{device}_slice") if device in ("cpu", "cuda") else ()
        if not all(m.args[0](params) for m in markers):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
