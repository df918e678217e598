"""The single on-disk format for rollout datasets (HDF5), and its in-memory counterparts.

This module is the public API; the pieces live in :mod:`imaginebench.data.dataset` (in-memory
types), :mod:`imaginebench.data.schema` (the on-disk format's names, dtypes and errors),
:mod:`imaginebench.data.validation` (the checks) and :mod:`imaginebench.data.hdf5` (atomic
writes and validated loads). The layout is documented in ``docs/dataset_format.md``.
"""

from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.data.hdf5 import load_dataset, save_dataset
from imaginebench.data.schema import (
    FORMAT_NAME,
    LEVELS,
    SCHEMA_VERSION,
    SOURCES,
    DatasetError,
    default_provenance,
)
from imaginebench.data.validation import validate

__all__ = [
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "LEVELS",
    "SOURCES",
    "DatasetError",
    "Episode",
    "RolloutDataset",
    "validate",
    "save_dataset",
    "load_dataset",
    "default_provenance",
]
