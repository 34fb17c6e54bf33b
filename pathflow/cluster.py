"""Sweeps beyond one process, on dask.distributed: `pathflow sweep --workers N` starts a local
cluster of N worker processes, `--scheduler tcp://HOST:PORT` joins a running one (as a cluster
manager such as dask-jobqueue or dask-kubernetes starts it; docs/cluster.md).

A task is one chunk of the sweep (`pathflow.batch.Chunk`: points of one compiled program, with
their common time grid), sent whole, so a worker runs exactly what the sweep would have run in
its own process and the result is the same Dataset. The client takes results as they complete
and keeps each point once, keyed by its place in the grid. A worker lost mid-task has its task
run again elsewhere (dask's scheduler does that, up to its `allowed-failures`); a task that
keeps failing stops the sweep with the points finished so far kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pathflow.scenario import ScenarioError

__all__ = ["connect", "run_remote"]

CONNECT_SECONDS = 10.0  # how long to try a scheduler before calling it unreachable


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """A dask `Client`: of a local cluster of `workers` processes (one thread each: a fluid
    step is many small kernels), or of the scheduler at `scheduler`; closed on exit. It does
    not become dask's default scheduler, which a notebook's own dask work would otherwise
    reach after the cluster has gone.
    ScenarioError, one line, when the scheduler cannot be reached."""
    from dask.distributed import Client, LocalCluster

    if (workers is None) == (scheduler is None):
        raise ScenarioError("--workers / --scheduler: give one of them")
    if workers is not None:
        if workers < 1:
            raise ScenarioError(f"--workers: {workers} must be at least 1")
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, \
                Client(cluster, set_as_default=False) as client:
            yield client
        return
    try:
        client = Client(scheduler, timeout=CONNECT_SECONDS, set_as_default=False)
    except ValueError as error:
        raise ScenarioError(f"--scheduler: {scheduler!r} is not an address such as "
                            f"tcp://HOST:PORT ({error})") from None
    except (OSError, TimeoutError) as error:
        raise ScenarioError(f"--scheduler: cannot reach {scheduler!r} within "
                            f"{CONNECT_SECONDS:g} s ({error})") from None
    with client:
        yield client


def run_remote(client: Any, function: Callable[..., Any], tasks: Iterable[tuple[Any, ...]]
               ) -> Iterator[Any]:
    """`function(*task)` for every task on the cluster, each result as soon as it is done (in
    the order they finish)."""
    from dask.distributed import as_completed

    futures = [client.submit(function, *task, pure=False) for task in tasks]
    for future in as_completed(futures, loop=client.loop):
        yield future.result()
