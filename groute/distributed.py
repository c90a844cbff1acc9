"""groute over MPI: one process per device, within a host or across hosts (docs/DISTRIBUTED.md).

Start a program as K processes (``mpiexec -n K python prog.py``, or ``groute launch -n K --
prog.py``); in each, :class:`Context` is a context of K devices of which this process drives
one (rank ``r``: device ``r``, a CPU virtual device or, with ``backend="cuda"``, the GPU of its
place on its host), and :func:`load_graph` loads this rank's part of a graph only.
The algorithms run on such a context unchanged (``groute.bfs(graph, source, ctx=ctx)``, the
solvers, the operator API's BSP engine): what crosses devices goes through the runtime's
Router and the context's collectives, which here are MPI's. Answers come back whole on every
rank. The command line does the same under ``mpiexec`` (``mpiexec -n 2 python -m groute bfs
--graph kron:10 --verify``).

Examples
--------
::

    import groute
    from groute import distributed

    with distributed.Context(backend="cuda") as ctx:      # one GPU per rank
        graph = distributed.load_graph("kron:16", ctx)     # this rank's rows only
        depth = groute.bfs(graph, 0, ctx=ctx)              # the whole answer, on every rank
        if ctx.rank == 0:
            print(depth.to_dict()[1])
"""
from __future__ import annotations

from .graph.rank_graph import RankGraph
from .graph.ranked import load_ranked
from .runtime.rank_context import RankContext as Context
from .runtime.ranks import launched_size

__all__ = ["Context", "RankGraph", "load_graph", "launched"]


def launched() -> bool:
    """Whether an MPI launcher started this process as one of several (``mpiexec -n K``, K >
    1), read from the launcher's environment without starting MPI."""
    return launched_size() > 1


def load_graph(source, ctx, *, seed: int | None = None, weighted: bool | None = None,
               measure: bool = False) -> RankGraph:
    """This rank's part of the graph ``source`` (a spec such as ``kron:20`` or ``grid:1000``,
    or a part set written by ``groute partition``) for the devices of ``ctx`` (a
    :class:`Context`); see :func:`groute.graph.ranked.load_ranked`.

    Parameters
    ----------
    source : str or path
        A graph spec, or the folder of a part set.
    ctx : Context
        The distributed context (every rank calls this with the same arguments).
    seed : int, optional
        The generator seed of a spec that sets none, and the seed of random weights.
    weighted : bool, optional
        True adds random integer weights where the graph has none; False drops them.
    measure : bool
        Trace every rank's host memory while it loads: the graph's ``load_memory``
        (:class:`groute.graph.ranked.LoadMemory`; docs/DISTRIBUTED.md, "Loading").

    Returns
    -------
    RankGraph
        This rank's rows and the whole graph's facts.

    Raises
    ------
    ValueError
        For a file that is not a part set (saying how to write one) or a part set of another
        part count than ``ctx`` has devices.

    Examples
    --------
    In a program run as K processes (the module docstring)::

        with distributed.Context() as ctx:
            graph = distributed.load_graph("grid:1000", ctx)
            print(ctx.rank, graph.first, graph.end)     # this rank's vertex range
    """
    return load_ranked(source, ctx.ranks, seed=seed, weighted=weighted, measure=measure,
                       device=ctx.local_device)


#: the command line's context when it runs as several processes (:func:`job_context`)
_job = None


def job_context(timeout=None, backend: str = "auto") -> Context:
    """The context of a command run as several processes (``mpiexec -n K python -m groute
    ...``) on ``backend`` (its ``--backend``): made on the first call, the same one after; the
    command line shuts it down at its end (:func:`close_job`) or ends the job after a failure
    (:func:`end_job`)."""
    global _job
    if _job is None:
        _job = Context(backend=backend, timeout=timeout)
    return _job


def job_rank() -> int | None:
    """This process's rank in the command line's job; None when it runs as one process."""
    return None if _job is None else _job.rank


def end_job(code: int = 1, error: BaseException | None = None) -> None:
    """After an error: tell the other ranks of this rank's ``error`` (:meth:`RankContext.
    tell_failure <groute.runtime.rank_context.RankContext.tell_failure>`: those waiting for
    this rank stop at once and raise it, naming this rank), then end every process of the
    command line's job (rank 0 first, so that its report is printed;
    :meth:`RankContext.end_job <groute.runtime.rank_context.RankContext.end_job>`).
    Nothing when there is no job."""
    if _job is not None:
        if error is not None:
            _job.tell_failure(error)
        _job.end_job(code)


def close_job() -> None:
    """Shut the command line's context down (every rank at its normal end)."""
    global _job
    if _job is not None:
        job, _job = _job, None
        job.shutdown()
