"""A LocalCluster of two worker processes, shared by the scale-out tests of a session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

distributed = pytest.importorskip("distributed", reason="the scale-out tests need dask.distributed")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """Two worker processes of one thread each, as two nodes would be."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as made:
        yield made


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster) as connected:
        yield connected
