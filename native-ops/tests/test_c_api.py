"""The C interface the Java bridge calls (djl_attn/c_api.h), driven through ctypes.

djl_attn_call (and djl_attn_call_operator, by index) dispatch once, with the kernel reporting an
invalid argument to the call instead of throwing it through the dispatcher, so a rejected call
returns its status and message without PyTorch's C shim logging `Exception in aoti_torch: ...` to
stderr; the tests capture the process's stderr (file descriptor 2, where libtorch writes) to
prove it.
"""

import ctypes

import pytest
import torch

from conftest import _find

OK, INVALID_ARGUMENT, NATIVE_ERROR = 0, 1, 2
TENSOR, OPTIONAL_TENSOR, INT, FLOAT, BOOL = range(5)

lib = ctypes.CDLL(str(_find("libdjl_attn.so")))
lib.djl_attn_call.restype = ctypes.c_int32
lib.djl_attn_call.argtypes = [
    ctypes.c_char_p,
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int32),
    ctypes.POINTER(ctypes.c_int64),
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int64),
]
lib.djl_attn_call_operator.restype = ctypes.c_int32
lib.djl_attn_call_operator.argtypes = [
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int64),
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int64),
]
lib.djl_attn_last_error_message.restype = ctypes.c_char_p
lib.djl_attn_delete_tensor.argtypes = [ctypes.c_int64]
lib.djl_attn_operator_count.restype = ctypes.c_int32
lib.djl_attn_operator_schema.restype = ctypes.c_char_p
lib.djl_attn_operator_schema.argtypes = [ctypes.c_int32]
lib.djl_attn_operator_name.restype = ctypes.c_char_p
lib.djl_attn_operator_name.argtypes = [ctypes.c_int32]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def new_handle(tensor):
    """A new at::Tensor* for `tensor` (the caller deletes it), as DJL's PtNDArray handles are."""
    return _get_pointer(torch._C._aoti.unsafe_alloc_void_ptr_from_tensor(tensor), None)


def take_tensor(handle):
    """The tensor of a handle djl_attn_call returned; the handle is consumed."""
    return torch._C._aoti.alloc_tensor_by_stealing_from_void_ptr(_new_capsule(handle, None, None))


def call(name, args, num_outputs, by_index=False):
    """Calls djl_attn_call (or djl_attn_call_operator) with (kind, value) pairs; returns (status,
    message, output tensors)."""
    handles = []
    kinds, values = [], []
    try:
        for kind, value in args:
            if kind in (TENSOR, OPTIONAL_TENSOR) and value is not None:
                handle = new_handle(value)
                handles.append(handle)
                value = handle
            elif kind == OPTIONAL_TENSOR:
                value = 0
            elif kind == FLOAT:
                value = ctypes.c_int64.from_buffer_copy(ctypes.c_double(value)).value
            kinds.append(kind)
            values.append(int(value))
        outputs = (ctypes.c_int64 * max(num_outputs, 1))()
        if by_index:
            status = lib.djl_attn_call_operator(
                operator_index(name), (ctypes.c_int64 * len(values))(*values), num_outputs,
                outputs)
        else:
            status = lib.djl_attn_call(
                name.encode(),
                len(args),
                (ctypes.c_int32 * len(kinds))(*kinds),
                (ctypes.c_int64 * len(values))(*values),
                num_outputs,
                outputs,
            )
        message = lib.djl_attn_last_error_message().decode()
        tensors = []
        if status == OK:
            tensors = [take_tensor(outputs[i]) for i in range(num_outputs)]
        return status, message, tensors
    finally:
        for handle in handles:
            lib.djl_attn_delete_tensor(handle)


def operator_index(name):
    for i in range(lib.djl_attn_operator_count()):
        if lib.djl_attn_operator_name(i).decode() == name:
            return i
    raise KeyError(name)


def flash_args(q, k, v, kv_lens=None, scale=0.5, causal=False, window_left=-1, window_right=-1,
               softcap=0.0, alibi_slopes=None):
    return [(TENSOR, q), (TENSOR, k), (TENSOR, v), (OPTIONAL_TENSOR, kv_lens), (FLOAT, scale),
            (BOOL, int(causal)), (INT, window_left), (INT, window_right), (FLOAT, softcap),
            (OPTIONAL_TENSOR, alibi_slopes)]


def test_a_call_runs_the_operator(device):
    q = torch.randn(2, 5, 4, 32, device=device)
    k = torch.randn(2, 7, 2, 32, device=device)
    v = torch.randn(2, 7, 2, 32, device=device)
    kv_lens = torch.tensor([7, 3], dtype=torch.int32, device=device)
    status, message, (out, lse) = call("flash_attention", flash_args(q, k, v, kv_lens, 0.3, True), 2)
    assert status == OK, message
    expected, expected_lse = torch.ops.djl_attn.flash_attention(q, k, v, kv_lens, 0.3, True)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(lse, expected_lse, rtol=0, atol=0)


def test_a_call_by_index_returns_the_outputs_asked_for(device, capfd):
    q = torch.randn(1, 9, 4, 16, device=device)
    k = torch.randn(1, 13, 2, 16, device=device)
    v = torch.randn(1, 13, 2, 16, device=device)
    expected, expected_lse = torch.ops.djl_attn.flash_attention(q, k, v, None, 0.25, True)
    status, message, (out, lse) = call("flash_attention", flash_args(q, k, v, None, 0.25, True), 2,
                                       by_index=True)
    assert status == OK, message
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(lse, expected_lse, rtol=0, atol=0)
    # The output alone: the logsumexp is freed inside the call.
    status, message, (out,) = call("flash_attention", flash_args(q, k, v, None, 0.25, True), 1,
                                   by_index=True)
    assert status == OK, message
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    # More outputs than the schema returns: refused before anything runs.
    status, message, _ = call("flash_attention", flash_args(q, k, v), 3, by_index=True)
    assert status == NATIVE_ERROR and "3 outputs asked, the schema returns 2" in message, message
    # A rejected call by index: the status, the operator's message, nothing on stderr.
    capfd.readouterr()
    status, message, _ = call("flash_attention", flash_args(q[0], k, v), 1, by_index=True)
    assert status == INVALID_ARGUMENT and "flash_attention: q: expected 4 dims" in message, message
    assert capfd.readouterr().err == ""


def test_an_index_out_of_range_is_refused():
    outputs = (ctypes.c_int64 * 1)()
    count = lib.djl_attn_operator_count()
    assert lib.djl_attn_call_operator(count, None, 0, outputs) == NATIVE_ERROR
    assert "no operator at index" in lib.djl_attn_last_error_message().decode()


# (what is wrong, the arguments, a part of the operator's message)
BAD_CALLS = [
    ("q rank", lambda d: flash_args(torch.randn(2, 3, 4, device=d), torch.randn(2, 3, 4, 8, device=d),
                                    torch.randn(2, 3, 4, 8, device=d)),
     "flash_attention: q: expected 4 dims"),
    ("kv_lens value", lambda d: flash_args(*[torch.randn(2, 3, 4, 8, device=d)] * 3,
                                           kv_lens=torch.tensor([3, 4], dtype=torch.int32, device=d)),
     "flash_attention: kv_lens: expected values in [0, Sk = 3], got 4 at index 1"),
    ("scale", lambda d: flash_args(*[torch.randn(1, 2, 1, 8, device=d)] * 3, scale=float("nan")),
     "flash_attention: scale: expected a finite value"),
]


@pytest.mark.parametrize("what,make_args,expected", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_a_rejected_call_logs_nothing(device, capfd, what, make_args, expected):
    args = make_args(device)
    capfd.readouterr()
    status, message, _ = call("flash_attention", args, 2)
    if device == "cuda":
        torch.cuda.synchronize()
    captured = capfd.readouterr()
    assert status == INVALID_ARGUMENT, message
    assert expected in message
    assert captured.err == "", captured.err
    assert captured.out == "", captured.out


def test_a_rejected_paged_call_logs_nothing(device, capfd):
    query = torch.randn(2, 4, 64, device=device)
    cache = torch.randn(3, 16, 2, 64, device=device)
    tables = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32, device=device)  # block 3 of 3
    lens = torch.tensor([20, 20], dtype=torch.int32, device=device)
    capfd.readouterr()
    status, message, _ = call(
        "paged_attention",
        [(TENSOR, query), (TENSOR, cache), (TENSOR, cache), (TENSOR, tables), (TENSOR, lens),
         (FLOAT, 0.125), (INT, 20), (OPTIONAL_TENSOR, None), (BOOL, 1), (OPTIONAL_TENSOR, None),
         (OPTIONAL_TENSOR, None), (INT, -1), (FLOAT, 0.0), (BOOL, 0)],
        1,
    )
    captured = capfd.readouterr()
    assert status == INVALID_ARGUMENT, message
    assert "paged_attention: block_tables: expected block ids in [0, num_blocks = 3)" in message
    assert captured.err == ""


def test_python_callers_get_the_exception_and_no_log(device, capfd):
    q = torch.randn(2, 3, 4, 8, device=device)
    bad = torch.tensor([3, 4], dtype=torch.int32, device=device)
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"kv_lens: expected values in \[0, Sk = 3\]"):
        torch.ops.djl_attn.flash_attention(q, q, q, bad, 0.5, False)
    assert capfd.readouterr().err == ""


def test_arguments_that_do_not_match_the_schema_are_refused_before_anything_runs(capfd):
    q = torch.randn(1, 2, 1, 8)
    capfd.readouterr()
    # An int where the schema has a tensor: read as a handle it would crash the kernel.
    args = flash_args(q, q, q)
    args[1] = (INT, 12345)
    status, message, _ = call("flash_attention", args, 2)
    assert status == NATIVE_ERROR
    assert "argument 1 has kind 2, the schema's is 0" in message
    status, message, _ = call("flash_attention", flash_args(q, q, q)[:5], 2)
    assert status == NATIVE_ERROR
    assert "the schema takes 10 arguments and returns 2 tensors, the call passed 5" in message
    status, message, _ = call("no_such_operator", [], 1)
    assert status == NATIVE_ERROR
    assert "no operator named 'no_such_operator'" in message
    assert capfd.readouterr().err == ""


def test_the_operator_list_is_the_registered_schemas():
    names = [lib.djl_attn_operator_name(i).decode() for i in range(lib.djl_attn_operator_count())]
    assert len(names) == len(set(names))
    for i, name in enumerate(names):
        (schema,) = torch._C._jit_get_schemas_for_operator("djl_attn::" + name)
        assert str(schema) == "djl_attn::" + lib.djl_attn_operator_schema(i).decode()
    assert lib.djl_attn_operator_schema(len(names)) == b""


def test_an_invalid_switch_in_the_environment_is_reported_once_at_load(tmp_path):
    # The DJL_ATTN_* switches are read once, when the library is loaded: a bad value is reported
    # there, once, and the default runs; calls do not fail.
    import subprocess
    import sys

    script = tmp_path / "load.py"
    script.write_text(
        "import ctypes, sys, torch\n"
        "torch.ops.load_library(sys.argv[1])\n"
        "q = torch.randn(1, 3, 2, 16)\n"
        "for _ in range(3):\n"
        "    torch.ops.djl_attn.flash_attention(q, q, q, None, 0.25, False)\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        "lib.djl_attn_option_errors.restype = ctypes.c_char_p\n"
        "lib.djl_attn_get_option.restype = ctypes.c_char_p\n"
        "print(lib.djl_attn_option_errors().decode(), end='')\n"
        "print(lib.djl_attn_get_option(b'DJL_ATTN_CPU_ISA').decode())\n")
    env = dict(__import__("os").environ, DJL_ATTN_CPU_ISA="avx9")
    result = subprocess.run([sys.executable, str(script), str(_find("libdjl_attn.so"))],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    line = "djl_attn: DJL_ATTN_CPU_ISA='avx9' ignored: expected one of auto, avx512, avx2, generic; using auto"
    assert result.stderr.count("DJL_ATTN_CPU_ISA") == 1, result.stderr
    assert line in result.stderr
    assert result.stdout == line + "\nauto\n"


def test_switches_are_set_in_process_and_refuse_unknown_names_and_values():
    lib.djl_attn_set_option.restype = ctypes.c_int32
    lib.djl_attn_set_option.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.djl_attn_get_option.restype = ctypes.c_char_p
    lib.djl_attn_get_option.argtypes = [ctypes.c_char_p]
    assert lib.djl_attn_get_option(b"DJL_ATTN_NO_SUCH") is None
    assert lib.djl_attn_set_option(b"DJL_ATTN_NO_SUCH", b"x") == INVALID_ARGUMENT
    assert "no switch named 'DJL_ATTN_NO_SUCH'" in lib.djl_attn_last_error_message().decode()
    old = lib.djl_attn_get_option(b"DJL_ATTN_CPU_ISA")
    try:
        assert lib.djl_attn_set_option(b"DJL_ATTN_CPU_ISA", b"generic") == OK
        assert lib.djl_attn_get_option(b"DJL_ATTN_CPU_ISA") == b"generic"
        assert lib.djl_attn_set_option(b"DJL_ATTN_CPU_ISA", b"sse") == INVALID_ARGUMENT
        assert lib.djl_attn_get_option(b"DJL_ATTN_CPU_ISA") == b"generic"
        assert lib.djl_attn_set_option(b"DJL_ATTN_CPU_ISA", b"") == OK
        assert lib.djl_attn_get_option(b"DJL_ATTN_CPU_ISA") == b"auto"
    finally:
        lib.djl_attn_set_option(b"DJL_ATTN_CPU_ISA", old)


_HEAP_SCRIPT = """
import ctypes, sys, torch

def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

torch.ops.load_library(sys.argv[1])
lib = ctypes.CDLL(sys.argv[1])
lib.djl_attn_release_free_memory.restype = ctypes.c_int32
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 64 << 10  # under glibc's 128 KiB mmap threshold: from the heap, as activations are
blocks = [libc.malloc(size) for _ in range(2048)]  # 128 MiB
for b in blocks:
    ctypes.memset(b, 1, size)
keep = libc.malloc(size)  # above them: the heap's top stays in use, so glibc keeps what they free
before = rss_kib()
for b in blocks:
    libc.free(b)
freed = rss_kib()
status = lib.djl_attn_release_free_memory()
print(before, freed, rss_kib(), status)
"""


def test_release_free_memory_hands_the_heaps_free_pages_back(tmp_path):
    # In a fresh process: what this one's tests allocated would blur the numbers.
    import platform
    import subprocess
    import sys

    script = tmp_path / "heap.py"
    script.write_text(_HEAP_SCRIPT)
    result = subprocess.run([sys.executable, str(script), str(_find("libdjl_attn.so"))],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    before, freed, after, status = map(int, result.stdout.split())
    if platform.libc_ver()[0] != "glibc":
        assert status == -1
        return
    assert freed > before - 16 * 1024, "glibc returned the freed blocks by itself: nothing to test"
    assert status == 1
    assert after < freed - 100 * 1024, (before, freed, after)


lib.djl_attn_check_paged_indices.restype = ctypes.c_int32
lib.djl_attn_check_paged_indices.argtypes = [
    ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
    ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
    ctypes.c_int64, ctypes.c_int64]


def check_paged_indices(tables, lens, slots, max_blocks, block_size, num_blocks):
    t = (ctypes.c_int32 * max(1, len(tables)))(*tables)
    c = (ctypes.c_int32 * max(1, len(lens)))(*lens)
    s = (ctypes.c_int64 * max(1, len(slots)))(*slots)
    status = lib.djl_attn_check_paged_indices(b"host", t, c, len(lens), max_blocks, s, len(slots),
                                              block_size, num_blocks)
    return None if status == OK else (status, lib.djl_attn_last_error_message().decode())


def test_paged_index_rules_on_host_arrays_are_the_operators():
    # djl_attn_check_paged_indices runs the operators' own checks (paged_checks.h) on host arrays:
    # random tables, contexts and slots, a fifth just outside a rule, get paged_attention's and
    # reshape_and_cache's verdict and message (after the op name).
    rng = __import__("random").Random()
    refused = 0
    for _ in range(150):
        num_blocks, block_size = rng.randint(1, 6), rng.choice([8, 16, 32])
        max_blocks, num_seqs = rng.randint(1, 4), rng.randint(1, 3)

        def edge(lo, hi):
            return rng.choice([lo - 1, hi + 1]) if rng.random() < 0.05 else rng.randint(lo, hi)

        lens = [edge(0, max_blocks * block_size) for _ in range(num_seqs)]
        tables = [edge(0, num_blocks - 1) for _ in range(num_seqs * max_blocks)]
        slots = [edge(-1, num_blocks * block_size - 1) for _ in range(rng.randint(1, 4))]
        host_tables = check_paged_indices(tables, lens, [], max_blocks, block_size, num_blocks)
        host_slots = check_paged_indices([], [], slots, max_blocks, block_size, num_blocks)
        cache = torch.zeros(num_blocks, block_size, 1, 64)
        try:
            torch.ops.djl_attn.paged_attention(
                torch.zeros(num_seqs, 1, 64), cache, cache,
                torch.tensor(tables, dtype=torch.int32).view(num_seqs, max_blocks),
                torch.tensor(lens, dtype=torch.int32), 0.125, max(1, max(lens)), None)
            op_tables = None
        except ValueError as e:  # the invalid-argument error of the bindings
            op_tables = str(e)
        try:
            key = torch.zeros(len(slots), 1, 64)
            torch.ops.djl_attn.reshape_and_cache(key, key, cache, cache,
                                                 torch.tensor(slots, dtype=torch.int64))
            op_slots = None
        except ValueError as e:
            op_slots = str(e)
        for host, op in ((host_tables, op_tables), (host_slots, op_slots)):
            assert (host is None) == (op is None), (host, op, tables, lens, slots)
            if host is not None:
                refused += 1
                assert host[0] == INVALID_ARGUMENT
                assert host[1].startswith("host: ") and host[1][len("host"):] in op, (host, op)
    assert 10 < refused < 290, refused


def test_paged_index_rules_refuse_malformed_sizes():
    assert check_paged_indices([], [], [], 1, 0, 4)[1].startswith("host: expected num_seqs")
    status = lib.djl_attn_check_paged_indices(b"host", None, None, 2, 3, None, 0, 16, 4)
    assert status == INVALID_ARGUMENT
    assert "null pointer" in lib.djl_attn_last_error_message().decode()
