"""libdjl_attn_plans.so for the plan tests (tests/test_plans_<family>.py): the CUDA launchers'
plan functions, pure host C++ built with the CPU library without nvcc, reached through ctypes.
GPUs are described by their facts: (SM count, opt-in shared memory per block in bytes, compute
capability major, minor)."""

import ctypes

from conftest import _find

H200 = (132, 227 * 1024, 9, 0)
H100 = (132, 227 * 1024, 9, 0)
A100 = (108, 163 * 1024, 8, 0)
ADA = (84, 99 * 1024, 8, 9)  # sm_89: 99 KiB of opt-in shared memory per block

path = _find("libdjl_attn_plans.so")
if path is None:
    raise RuntimeError("libdjl_attn_plans.so not found: build native-ops first (it needs no nvcc)")
lib = ctypes.CDLL(str(path))
