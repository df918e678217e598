"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


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
