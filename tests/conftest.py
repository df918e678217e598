"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``-n``), split the cores between the workers: each worker's torch and
    the CLI subprocesses it starts (through ``OMP_NUM_THREADS``) get ``cores // workers``
    intra-op threads, so two workers on two cores never oversubscribe them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(threads)
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def _one_intra_op_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One intra-op torch thread for one test: small networks run faster, and a busy 2-core
    machine does not slow them down (two threads make BERT ~30x slower there)."""
    yield from _one_intra_op_thread()


@pytest.fixture(scope="module")
def one_thread_per_module() -> Iterator[None]:
    """:func:`one_thread` for a whole module (``pytestmark = pytest.mark.usefixtures(...)``) and
    for module-scoped fixtures that build models."""
    yield from _one_intra_op_thread()
