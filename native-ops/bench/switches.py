"""The DJL_ATTN_* switches for the benchmarks, as a mapping: `switches[name] = value` sets one
in-process (djl_attn_set_option; the libraries read the environment only once, at load),
`switches.pop(name, None)` restores its default, `switches.get(name)` reads it. Call after the
libraries are loaded; docs/operators.md ("Switches") lists them."""

import ctypes
import os
import pathlib

_NATIVE_OPS = pathlib.Path(__file__).resolve().parent.parent


def _library():
    for d in (os.environ.get("DJL_ATTN_LIB_DIR"), _NATIVE_OPS / "build"):
        if d and (pathlib.Path(d) / "libdjl_attn.so").is_file():
            lib = ctypes.CDLL(str(pathlib.Path(d) / "libdjl_attn.so"))
            lib.djl_attn_set_option.restype = ctypes.c_int32
            lib.djl_attn_set_option.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            lib.djl_attn_get_option.restype = ctypes.c_char_p
            lib.djl_attn_get_option.argtypes = [ctypes.c_char_p]
            lib.djl_attn_last_error_message.restype = ctypes.c_char_p
            return lib
    raise RuntimeError("libdjl_attn.so not found: build native-ops first")


class _Switches:
    def __init__(self):
        self._lib = None

    def _l(self):
        if self._lib is None:
            self._lib = _library()
        return self._lib

    def get(self, name, default=None):
        value = self._l().djl_attn_get_option(name.encode())
        return default if value is None else value.decode()

    def __setitem__(self, name, value):
        lib = self._l()
        if lib.djl_attn_set_option(name.encode(), str(value).encode()) != 0:
            raise ValueError(lib.djl_attn_last_error_message().decode())

    def values(self, name):
        """The values the switch takes in this build (the tuning ones only in a DJL_ATTN_TUNING
        build), the default first; [] for an unknown switch."""
        lib = self._l()
        lib.djl_attn_option_values.restype = ctypes.c_char_p
        lib.djl_attn_option_values.argtypes = [ctypes.c_char_p]
        value = lib.djl_attn_option_values(name.encode())
        return [] if value is None else value.decode().split(",")

    def pop(self, name, default=None):
        value = self.get(name, default)
        self[name] = ""
        return value


switches = _Switches()
