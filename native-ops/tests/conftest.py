"""Loads the operator libraries into PyTorch once for the whole suite.

The libraries are looked up in $DJL_ATTN_LIB_DIR, else in the CMake build directories that the
Maven build and scripts/gpu-check.sh use. The CUDA library is loaded when PyTorch sees a GPU.
"""

import os
import pathlib

import pytest
import torch

NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent
CANDIDATE_DIRS = [
    os.environ.get("DJL_ATTN_LIB_DIR"),
    NATIVE_OPS / "build",
    NATIVE_OPS / "target" / "classes" / "io" / "djlattention" / "jni" / "linux-x86_64",
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

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    # Fresh random inputs per test, reproducible per test id within a run.
    torch.manual_seed(hash(os.environ.get("PYTEST_CURRENT_TEST", "")) % (2**31))
