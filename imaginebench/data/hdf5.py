"""HDF5 input/output of rollout datasets: atomic writes and validated loads."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from imaginebench.atomic import atomic_path
from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.schema import (
    ARRAY_KINDS,
    COMPRESSED,
    CONFIDENCE_GROUP,
    FORMAT_NAME,
    INT_KINDS,
    LEVELS,
    SCHEMA_VERSION,
    SOURCES,
    STRING_TABLES,
    SUPPORTED_SCHEMA_VERSIONS,
    DatasetError,
    NonFinite,
    is_int,
    normalise_action_spec,
)
from imaginebench.data.validation import _check_ids, _kind_name, validate

log = logging.getLogger(__name__)

#: A dataset may declare at most this many times the bytes it stores (plus the slack below):
#: deflate, the only compression we write, cannot exceed 1032:1, so anything beyond is a
#: truncated or crafted file, refused before its arrays are allocated.
_MAX_EXPANSION = 1100
_EXPANSION_SLACK = 1 << 20

# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def _create_array(h5: h5py.File, name: str, data: np.ndarray) -> None:
    """Write one numeric array (big transition arrays are gzip-compressed)."""
    kwargs: dict[str, Any] = {}
    if name in COMPRESSED and data.size:
        kwargs = {"compression": "gzip", "compression_opts": 4, "shuffle": True, "chunks": True}
    h5.create_dataset(name, data=data, **kwargs)


def _create_strings(h5: h5py.File, name: str, table: list[str]) -> None:
    h5.create_dataset(
        name,
        data=np.array(table, dtype=object),
        shape=(len(table),),
        dtype=h5py.string_dtype("utf-8"),
    )


def _write_payload(h5: h5py.File, ds: RolloutDataset) -> None:
    h5.attrs["format"] = FORMAT_NAME
    h5.attrs["schema_version"] = np.int64(SCHEMA_VERSION)
    h5.attrs["domain"] = ds.domain
    h5.attrs["state_dim"] = np.int64(ds.state_dim)
    h5.attrs["action_spec"] = json.dumps(ds.action_spec, sort_keys=True)
    h5.attrs["provenance"] = json.dumps(ds.provenance, sort_keys=True)
    h5.attrs["levels"] = json.dumps(list(LEVELS))
    h5.attrs["sources"] = json.dumps(list(SOURCES))
    for name in ARRAY_KINDS:
        _create_array(h5, name, getattr(ds, name))
    for name in STRING_TABLES:
        _create_strings(h5, name, getattr(ds, name))
    if ds.confidence:
        group = h5.create_group(CONFIDENCE_GROUP)
        for name, values in ds.confidence.items():
            compression = {"compression": "gzip", "compression_opts": 4, "shuffle": True}
            group.create_dataset(name, data=values, **(compression if values.size else {}))


def save_dataset(
    ds: RolloutDataset, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Validate ``ds`` strictly and write it atomically to ``path``; return the resolved path.

    The file is written to a hidden ``.<name>.*.tmp`` sibling, fsynced and then renamed onto
    ``path``, so ``path`` is never left partially written and a pre-existing file survives any
    failure.  Refuses to replace an existing file unless ``overwrite=True``.
    """
    path = Path(path).expanduser().absolute()
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, cannot write a dataset file there")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path}: file already exists; pass overwrite=True to replace it")
    canonical = validate(ds, source_name=f"{path} (while saving)", nonfinite="raise")
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "x") as h5:  # "x": fail rather than clobber; mode follows the umask
            _write_payload(h5, canonical)
            h5.flush()
        if path.exists() and not overwrite:  # appeared while we were writing
            raise FileExistsError(f"{path}: file already exists; pass overwrite=True to replace it")
    return path


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def _read_attr(h5: h5py.File, src: str, name: str) -> Any:
    if name not in h5.attrs:
        raise DatasetError(src, f"missing root attribute '{name}'")
    value = h5.attrs[name]
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value


def _read_str_attr(h5: h5py.File, src: str, name: str) -> str:
    value = _read_attr(h5, src, name)
    if not isinstance(value, str):
        raise DatasetError(src, f"root attribute '{name}' must be a string, got {value!r}")
    return value


def _read_json_attr(h5: h5py.File, src: str, name: str) -> Any:
    text = _read_str_attr(h5, src, name)
    try:
        return json.loads(text)
    except ValueError as err:
        raise DatasetError(
            src, f"root attribute '{name}' is not valid JSON ({err}): {text[:80]!r}"
        ) from None


def _read_int_attr(h5: h5py.File, src: str, name: str) -> int:
    value = _read_attr(h5, src, name)
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if not is_int(value):
        raise DatasetError(src, f"root attribute '{name}' must be an integer, got {value!r}")
    return int(value)


def _get_dataset(h5: h5py.File, src: str, name: str) -> h5py.Dataset:
    if name not in h5:
        raise DatasetError(src, f"missing dataset '{name}'")
    obj = h5[name]
    if not isinstance(obj, h5py.Dataset):
        raise DatasetError(src, f"'{name}' must be a dataset, found {type(obj).__name__}")
    return obj


def _read_array(h5: h5py.File, src: str, name: str, kinds: str) -> np.ndarray:
    dset = _get_dataset(h5, src, name)
    if h5py.check_string_dtype(dset.dtype) is not None or dset.dtype.kind not in kinds:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise DatasetError(
            src,
            f"dataset '{name}' has dtype {dset.dtype} "
            f"({_kind_name(dset.dtype.kind)}), expected {wanted}",
        )
    try:
        return np.asarray(dset[()])
    except MemoryError:
        size = dset.size * dset.dtype.itemsize
        raise DatasetError(src, f"dataset '{name}' needs {size} bytes: not enough memory") from None
    except (OSError, RuntimeError, ValueError, TypeError) as err:
        raise DatasetError(src, f"cannot read dataset '{name}' ({err})") from None


def _read_strings(h5: h5py.File, src: str, name: str) -> list[str]:
    dset = _get_dataset(h5, src, name)
    if h5py.check_string_dtype(dset.dtype) is None:
        raise DatasetError(
            src,
            f"dataset '{name}' must be a variable-length UTF-8 string "
            f"dataset, got dtype {dset.dtype}",
        )
    if dset.ndim != 1:
        raise DatasetError(src, f"dataset '{name}' must be 1-D, got shape {dset.shape}")
    try:
        return [str(s) for s in dset.asstr()[()]]
    except (OSError, RuntimeError, ValueError, TypeError, UnicodeDecodeError) as err:
        raise DatasetError(src, f"cannot read string dataset '{name}' ({err})") from None


def _enum_lut(src: str, name: str, attr_value: Any, known: tuple[str, ...]) -> np.ndarray | None:
    """Map a file's enum order onto ours (None if identical)."""
    if not isinstance(attr_value, list) or not all(isinstance(v, str) for v in attr_value):
        raise DatasetError(src, f"root attribute '{name}' must be a JSON list of strings")
    if tuple(attr_value) == known:
        return None
    unknown = [v for v in attr_value if v not in known]
    if unknown:
        raise DatasetError(
            src,
            f"root attribute '{name}' lists unknown value(s) {unknown}; "
            f"this version knows {list(known)}",
        )
    return np.asarray([known.index(v) for v in attr_value], dtype=np.int64)


def _remap(src: str, name: str, ids: np.ndarray, lut: np.ndarray | None, attr: str) -> np.ndarray:
    if lut is None:
        return ids
    ids64 = ids.astype(np.int64)
    _check_ids(src, name, ids64, lut.size, f"index into the file's '{attr}' attribute")
    return lut[ids64]


def _confidence_datasets(h5: h5py.File, src: str, version: int) -> list[str]:
    """Paths of the confidence datasets (``confidence/<source>``; none before version 2)."""
    if version < 2 or CONFIDENCE_GROUP not in h5:
        return []
    group = h5[CONFIDENCE_GROUP]
    if not isinstance(group, h5py.Group):
        raise DatasetError(
            src, f"'{CONFIDENCE_GROUP}' must be a group of datasets, found {type(group).__name__}"
        )
    return [f"{CONFIDENCE_GROUP}/{name}" for name in sorted(group)]


def _check_declared_shapes(
    h5: h5py.File, src: str, state_dim: int, action_spec: dict[str, Any], extra: list[str]
) -> None:
    """Check the declared shapes against the root attributes and the stored bytes before any
    array is read, so a small file cannot make the loader allocate a huge array."""
    names = (*ARRAY_KINDS, *STRING_TABLES, *extra)
    dsets = {name: _get_dataset(h5, src, name) for name in names}
    for name, dset in dsets.items():
        declared, stored = dset.size * dset.dtype.itemsize, dset.id.get_storage_size()
        if declared > _MAX_EXPANSION * stored + _EXPANSION_SLACK:
            raise DatasetError(
                src,
                f"dataset '{name}' declares shape {dset.shape} ({declared} bytes) but stores "
                f"only {stored} bytes (truncated or crafted file)",
            )
    states = dsets["states"].shape
    if len(states) == 2 and states[1] != state_dim:
        raise DatasetError(
            src,
            f"dataset 'states' has {states[1]} columns but root attribute state_dim is {state_dim}",
        )
    actions = list(dsets["actions"].shape[1:])
    expected = [] if action_spec["type"] == "discrete" else list(action_spec["shape"])
    if dsets["actions"].ndim and actions != expected:
        raise DatasetError(
            src,
            f"dataset 'actions' has per-transition shape {actions}, expected action_spec "
            f"shape {expected}",
        )


def _load_open(h5: h5py.File, src: str, nonfinite: NonFinite) -> RolloutDataset:
    fmt = _read_attr(h5, src, "format")
    if fmt != FORMAT_NAME:
        raise DatasetError(
            src,
            f"root attribute 'format' is {fmt!r}, expected {FORMAT_NAME!r} "
            f"(not an imaginebench rollout dataset)",
        )
    version = _read_int_attr(h5, src, "schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise DatasetError(
            src,
            f"unsupported schema_version {version}; this version of "
            f"imaginebench reads {list(SUPPORTED_SCHEMA_VERSIONS)}",
        )
    domain = _read_str_attr(h5, src, "domain")
    state_dim = _read_int_attr(h5, src, "state_dim")
    action_spec = normalise_action_spec(_read_json_attr(h5, src, "action_spec"), src)
    provenance = _read_json_attr(h5, src, "provenance")
    level_lut = _enum_lut(src, "levels", _read_json_attr(h5, src, "levels"), LEVELS)
    source_lut = _enum_lut(src, "sources", _read_json_attr(h5, src, "sources"), SOURCES)

    confidence_paths = _confidence_datasets(h5, src, version)
    _check_declared_shapes(h5, src, state_dim, action_spec, confidence_paths)
    arrays: dict[str, np.ndarray] = {}
    for name, kinds in ARRAY_KINDS.items():
        if name == "actions":
            kinds = INT_KINDS if action_spec["type"] == "discrete" else "f"
        arrays[name] = _read_array(h5, src, name, kinds)
    tables = {name: _read_strings(h5, src, name) for name in STRING_TABLES}
    confidence = {
        path.split("/", 1)[1]: _read_array(h5, src, path, "f") for path in confidence_paths
    }

    arrays["episode_level"] = _remap(
        src, "episode_level", arrays["episode_level"], level_lut, "levels"
    )
    arrays["episode_source"] = _remap(
        src, "episode_source", arrays["episode_source"], source_lut, "sources"
    )
    raw = RolloutDataset(
        **arrays,
        **tables,
        domain=domain,
        action_spec=action_spec,
        provenance=provenance,
        confidence=confidence,
    )
    return validate(raw, source_name=src, nonfinite=nonfinite)


def load_dataset(path: str | os.PathLike[str], *, nonfinite: NonFinite = "raise") -> RolloutDataset:
    """Read and fully validate a dataset file.

    Raises :class:`DatasetError` (a ``ValueError`` whose message starts with the path) for any
    format violation, and :class:`FileNotFoundError` if ``path`` does not exist.  Episodes with
    NaN/inf values raise unless ``nonfinite="drop"``, which removes them and records the count in
    ``dropped_nonfinite``.
    """
    if nonfinite not in ("raise", "drop"):
        raise ValueError(f"nonfinite must be 'raise' or 'drop', got {nonfinite!r}")
    path = Path(path).expanduser()
    src = str(path)
    if not path.exists():
        raise FileNotFoundError(2, f"{src}: dataset file does not exist", src)
    if path.is_dir():
        raise DatasetError(src, "is a directory, not a dataset file")
    try:
        h5 = h5py.File(path, "r")
    except OSError as err:
        raise DatasetError(
            src, f"not a readable HDF5 file (corrupt, truncated or another format): {err}"
        ) from None
    try:
        with h5:
            return _load_open(h5, src, nonfinite)
    except DatasetError:
        raise
    except (OSError, KeyError, RuntimeError, TypeError, ValueError) as err:
        raise DatasetError(src, f"failed to read the file ({type(err).__name__}: {err})") from None
