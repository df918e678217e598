"""Read ``.npy`` files without running code hidden in them.

``np.load(allow_pickle=True)`` unpickles object arrays with the standard unpickler, which calls
whatever function the file names.  :func:`load_npy` reads plain arrays with
``allow_pickle=False`` and object arrays (such as a dict saved with ``np.save``) with an
unpickler that builds only numpy arrays, dtypes and scalars besides the built-in containers,
strings and numbers that pickle encodes without naming a function.
"""

from __future__ import annotations

import os
import pickle
from typing import IO, Any

import numpy as np
from numpy.lib import format as npy_format

__all__ = ["UnsafePickleError", "load_npy"]


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle names a global that is not on the allow-list."""


def _allowed() -> dict[tuple[str, str], Any]:
    """The numpy callables array pickles use, under every module name numpy has used."""
    reconstruct = np.zeros(1).__reduce__()[0]  # numpy(._core|.core).multiarray._reconstruct
    scalar = np.float64(0).__reduce__()[0]  # numpy(._core|.core).multiarray.scalar
    out: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out[(module, "_reconstruct")] = reconstruct
        out[(module, "scalar")] = scalar
    return out


_ALLOWED = _allowed()


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"the pickle asks for {module}.{name}; only numpy arrays, lists, dicts, "
                "strings and numbers are read"
            ) from None


def _read_header(f: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = npy_format.read_magic(f)
    if version == (1, 0):
        return npy_format.read_array_header_1_0(f)
    if version == (2, 0):
        return npy_format.read_array_header_2_0(f)
    raise ValueError(f"unsupported .npy format version {version}")


def load_npy(path: str | os.PathLike[str]) -> Any:
    """The array in ``path``; a 0-d object array (``np.save`` of a dict, ...) is returned as
    its object.

    Raises:
        UnsafePickleError: an object array's pickle names anything but numpy's array, dtype or
            scalar constructors (nothing it names is called).
        ValueError, OSError, pickle.UnpicklingError, EOFError: the file is not a valid ``.npy``.
    """
    with open(path, "rb") as f:
        shape, fortran_order, dtype = _read_header(f)
        if not dtype.hasobject:
            f.seek(0)
            return np.load(f, allow_pickle=False)
        obj = _RestrictedUnpickler(f, encoding="latin1").load()
    if not isinstance(obj, np.ndarray) or obj.shape != shape:
        raise ValueError(f"the pickle holds a {type(obj).__name__}, not the declared {shape} array")
    return obj.item() if obj.shape == () else obj
