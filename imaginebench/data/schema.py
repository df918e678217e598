"""The on-disk rollout format: its name and version, the datasets and attributes of a file with
the dtypes accepted on load, the allowed sources, action specs and provenance, and
:class:`DatasetError` for anything that violates it. The layout is documented in
``docs/dataset_format.md``; :mod:`imaginebench.data.hdf5` writes and reads it and
:mod:`imaginebench.data.validation` checks datasets against it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any, Literal

import h5py
import numpy as np

from imaginebench.envs.base import LEVELS  # noqa: F401  (the levels a file may name)

FORMAT_NAME = "imaginebench-rollouts"
SCHEMA_VERSION = 2
#: Version 2 added the optional ``confidence`` group; version 1 files load without it.
SUPPORTED_SCHEMA_VERSIONS = (1, 2)
SOURCES: tuple[str, ...] = ("real", "imaginary")

NonFinite = Literal["raise", "drop"]

INT_KINDS = "iu"  # numpy dtype kinds of integer arrays
# Datasets of the file, in write order, with the dtype kinds accepted on load (numpy ``kind``).
ARRAY_KINDS: dict[str, str] = {
    "states": "f",
    "actions": "iuf",  # refined with the action spec
    "rewards": "f",
    "terminals": "b",
    "truncations": "b",
    "episode_offsets": INT_KINDS,
    "episode_instruction": INT_KINDS,
    "episode_task": INT_KINDS,
    "episode_level": INT_KINDS,
    "episode_source": INT_KINDS,
    "episode_success": "b",
}
STRING_TABLES = ("instructions", "tasks")
ROOT_ATTRS = (
    "format",
    "schema_version",
    "domain",
    "state_dim",
    "action_spec",
    "provenance",
    "levels",
    "sources",
)
COMPRESSED = ("states", "actions", "rewards")  # written with compression
#: Optional group (schema version >= 2) holding one ``(N,)`` float dataset per confidence
#: source (e.g. ``confidence/likelihood``): how far each transition may be trusted, in [0, 1].
CONFIDENCE_GROUP = "confidence"
#: Names of confidence sources: lower-case letters, digits and underscores.
CONFIDENCE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
KIND_NAMES = {  # numpy dtype kinds in words, for error messages
    "f": "floating point",
    "i": "signed integer",
    "u": "unsigned integer",
    "b": "boolean",
    "c": "complex",
    "O": "object",
    "S": "bytes",
    "U": "unicode",
}


class DatasetError(ValueError):
    """A dataset (file or in-memory object) violates the format.

    The message always starts with the source (file path or a description) followed by the problem.
    """

    def __init__(self, source: str | os.PathLike[str], problem: str) -> None:
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")


def default_provenance(**extra: Any) -> dict[str, Any]:
    """A provenance dict with command line, creation time and library versions, plus ``extra``."""
    try:
        from importlib.metadata import version

        pkg_version = version("imaginebench")
    except Exception:  # not installed (e.g. running from a checkout)
        pkg_version = "unknown"
    prov: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "imaginebench_version": pkg_version,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "h5py": h5py.__version__,
    }
    prov.update(extra)
    return prov


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def normalise_action_spec(spec: Any, source: str) -> dict[str, Any]:
    """Check an action spec and return a plain-JSON copy (extra keys are kept)."""

    def bad(problem: str) -> DatasetError:
        return DatasetError(source, f"invalid action_spec {spec!r}: {problem}")

    if not isinstance(spec, dict):
        raise bad("must be a JSON object")
    out = dict(spec)
    kind = spec.get("type")
    if kind == "discrete":
        n = spec.get("n")
        if not is_int(n) or int(n) < 1:
            raise bad("discrete spec needs an integer 'n' >= 1")
        out["n"] = int(n)
    elif kind == "continuous":
        shape = spec.get("shape")
        if (
            not isinstance(shape, (list, tuple))
            or not shape
            or not all(is_int(s) and int(s) >= 1 for s in shape)
        ):
            raise bad("continuous spec needs a non-empty 'shape' list of positive integers")
        out["shape"] = [int(s) for s in shape]
        bounds = {}
        for key in ("low", "high"):
            if key not in spec:
                raise bad(f"continuous spec needs '{key}'")
            try:
                arr = np.asarray(spec[key], dtype=np.float64)
                bounds[key] = np.broadcast_to(arr, tuple(out["shape"]))
            except (TypeError, ValueError):
                raise bad(
                    f"'{key}' must be a number or a list broadcastable to shape {out['shape']}"
                ) from None
            if np.isnan(arr).any():
                raise bad(f"'{key}' contains NaN")
            out[key] = arr.tolist()
        if (bounds["low"] > bounds["high"]).any():
            raise bad("'low' exceeds 'high'")
    else:
        raise bad("'type' must be 'discrete' or 'continuous'")
    try:
        json.dumps(out, allow_nan=True)
    except (TypeError, ValueError) as err:
        raise bad(f"not JSON-serialisable ({err})") from None
    return out
