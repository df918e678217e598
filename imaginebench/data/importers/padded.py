"""Reading rollout files of other projects that store episodes as padded ``(N, T, ...)``
arrays: pickled ``.npy`` dicts (read without running code), HDF5 files, and the shape and
content checks that name the file when something does not fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.data.format import DatasetError
from imaginebench.data.safe_npy import UnsafePickleError, load_npy

INTEGRAL_TOL = 1e-4  # how far a whole number stored as a float may be off


def load_npy_dict(path: Path, what: str) -> dict[str, Any]:
    """The dict pickled in a ``.npy`` file, read by :func:`load_npy` (which runs no code)."""
    if not path.exists():
        raise FileNotFoundError(2, f"{path}: {what} does not exist", str(path))
    try:
        obj = load_npy(path)
    except UnsafePickleError as err:
        raise DatasetError(path, f"refused to load the {what}: {err}") from None
    except Exception as err:  # a broken pickle can fail with almost any exception type
        raise DatasetError(
            path, f"cannot read the {what} as a .npy file ({type(err).__name__}: {err})"
        ) from None
    if not isinstance(obj, dict):
        kind = (
            f"array of shape {obj.shape} and dtype {obj.dtype}"
            if isinstance(obj, np.ndarray)
            else type(obj).__name__
        )
        raise DatasetError(
            path, f"the {what} must hold a pickled dict (np.save of a dict), got an {kind}"
        )
    return {str(k): v for k, v in obj.items()}


def read_h5(path: Path, state_dim: int, obs_dims: tuple[int, ...]) -> dict[str, Any]:
    """Every top-level dataset of an HDF5 file; ``(N, T, D)`` observations with ``D`` in
    ``obs_dims`` keep their first ``state_dim`` columns only (their width goes under
    ``_<name>_dim``)."""
    import h5py

    try:
        h5 = h5py.File(path, "r")
    except OSError as err:
        raise DatasetError(path, f"not a readable HDF5 file ({err})") from None
    out: dict[str, Any] = {}
    with h5:
        for name, obj in h5.items():
            if not isinstance(obj, h5py.Dataset):
                continue
            try:
                if (
                    name in ("observations", "next_observations")
                    and obj.ndim == 3
                    and obj.shape[-1] in obs_dims
                ):
                    out[name] = obj[:, :, :state_dim]  # never load the instruction embedding
                    out[f"_{name}_dim"] = obj.shape[-1]
                elif h5py.check_string_dtype(obj.dtype) is not None:
                    out[name] = obj.asstr()[()]
                else:
                    out[name] = obj[()]
            except (OSError, RuntimeError, ValueError, TypeError) as err:
                raise DatasetError(path, f"cannot read dataset '{name}' ({err})") from None
    return out


def strings(raw: Any) -> list[str]:
    """One episode's paraphrases, decoded and stripped, empty ones removed, order kept."""
    out = []
    for s in np.ravel(np.asarray(raw, dtype=object)):
        if isinstance(s, (bytes, np.bytes_)):
            s = bytes(s).decode("utf-8", errors="replace")
        s = str(s).strip()
        if s:
            out.append(s)
    return out


class Checker:
    """Shape / content checks that raise :class:`DatasetError` naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, problem: str) -> DatasetError:
        return DatasetError(self.path, problem)

    def require(self, data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        missing = [k for k in keys if k not in data]
        if missing:
            raise self.fail(
                f"missing required key(s) {missing} ({where}); found "
                f"{sorted(k for k in data if not k.startswith('_'))}"
            )

    def array(self, data: dict[str, Any], key: str) -> np.ndarray:
        try:
            arr = np.asarray(data[key])
        except (TypeError, ValueError) as err:
            raise self.fail(f"'{key}' is not a rectangular array ({err})") from None
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise self.fail(f"'{key}' must be numeric, got dtype {arr.dtype}")
        return arr

    def per_step(self, arr: np.ndarray, key: str, n: int, t: int) -> np.ndarray:
        """``(N, T)`` or ``(N, T, 1)`` -> ``(N, T)``."""
        if arr.ndim == 3 and arr.shape[-1] == 1:
            arr = arr[..., 0]
        if arr.shape != (n, t):
            raise self.fail(
                f"'{key}' must have shape (N, T) or (N, T, 1) = ({n}, {t}[, 1]) like "
                f"'observations', got {arr.shape}"
            )
        return arr

    def lengths(self, masks: np.ndarray) -> np.ndarray:
        """Episode lengths from ``(N, T)`` masks, which must be prefixes of 1s (then 0s)."""
        if not np.all((masks == 0) | (masks == 1)):
            bad = np.unique(masks[(masks != 0) & (masks != 1)])[:5]
            raise self.fail(f"'masks' must contain only 0 and 1, found {bad.tolist()}")
        not_prefix = np.flatnonzero((masks[:, 1:] > masks[:, :-1]).any(axis=1))
        if not_prefix.size:
            raise self.fail(
                f"'masks' must be a contiguous prefix of 1s per episode (then 0s); "
                f"{not_prefix.size} episode(s) are not, first: episode "
                f"{int(not_prefix[0])} = {masks[not_prefix[0]].astype(int).tolist()}"
            )
        return masks.sum(axis=1).astype(np.int64)
