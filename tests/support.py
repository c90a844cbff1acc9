"""Helpers shared by test modules (import as ``from support import ...``).

Kept out of conftest.py on purpose: there are several conftest.py files (tests/, tests/graph/),
and ``from conftest import`` would pick whichever was imported first.
"""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from groute.operators import Functor
from groute.tuning import WorklistTuning

#: the repository's sibling ``shared/graphs`` (absent on machines without it: tests skip)
SHARED_GRAPHS = Path(__file__).resolve().parents[1].parent / "shared" / "graphs"


def _claim_once(s, v):
    v = np.unique(v[s["reached"][v] == 0])
    s["reached"][v] = 1
    return v


#: a BFS-style claim without a level (state ``reached``, int32): the first visit of a vertex
#: accepts it, once; the order-free loop of the async engine's tests and of the turns' tests
CLAIM_ONCE = Functor(name="claim", params="int* reached",
                     cuda="return atomicCAS(&reached[v], 0, 1) == 0;", numpy=_claim_once)


def shared_graph_path(name: str) -> Path:
    """The shared graph ``name`` (``SHARED_GRAPHS / "<name>.mtx.gz"``), or skip the test where
    this machine does not have it: one check for every test that reads a real graph."""
    path = SHARED_GRAPHS / f"{name}.mtx.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


def gpu_marks(k: int):
    """The marks of a case on ``k`` CUDA GPUs: ``gpu``, and ``multigpu`` for k >= 2, so that
    ``-m gpu``/``-m multigpu`` select it and a machine with fewer GPUs skips it."""
    return [pytest.mark.gpu] + ([pytest.mark.multigpu] if k >= 2 else [])


def backends(min_gpus: int = 1):
    """The backends to parametrise over: cpu always; cuda with :func:`gpu_marks` of the
    ``min_gpus`` the test needs."""
    return ["cpu", pytest.param("cuda", marks=gpu_marks(min_gpus))]


def graph_from(n, edges, directed=True, name="hand"):
    """A CSRGraph of ``n`` vertices from ``(u, v)`` pairs; undirected: both directions stored.
    One builder for the hand-made graphs of the BFS, PageRank and CC tests."""
    from groute.graph import CSRGraph
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    src, dst = e[:, 0], e[:, 1]
    if not directed:
        src, dst = np.r_[src, dst], np.r_[dst, src]
    return CSRGraph.from_edges(src, dst, n, directed=directed, name=name)


def device_cases(counts):
    """(backend, k) pairs for ``parametrize("backend, k", ...)``: CPU always; CUDA with
    :func:`gpu_marks`. Ids ``cpu-x2``..."""
    out = []
    for k in counts:
        out.append(pytest.param("cpu", k, id=f"cpu-x{k}"))
        out.append(pytest.param("cuda", k, marks=gpu_marks(k), id=f"cuda-x{k}"))
    return out


#: one thread that spins for ``cycles`` clock cycles (:func:`spin`)
SPIN_KERNEL = r"""
extern "C" __global__ void groute_test_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}"""


def spin(device, stream: str = "compute", seconds: float = 0.2):
    """Queue one block spinning about ``seconds`` on ``device``'s compute stream
    (``stream="compute"``) or on CuPy's default stream of its GPU (``"default"``). Work queued
    behind it on that stream waits; work on the other does not (the compute stream is
    non-blocking), so CuPy work groute left on the wrong stream reads an array before the
    kernel that writes it ran ("compute" busy), or writes one after a kernel read it
    ("default" busy): the race a busy, shared GPU shows."""
    import cupy
    with device.use():
        props = cupy.cuda.runtime.getDeviceProperties(device.gpu)
        cycles = int(seconds * (props.get("clockRate") or 2_000_000) * 1e3)     # kHz
        kernel = cupy.RawKernel(SPIN_KERNEL, "groute_test_spin")
        target = (device.compute_stream.raw if stream == "compute"
                  else cupy.cuda.Stream.null)               # CuPy's default stream
        kernel((1,), (1,), (np.int64(cycles),), stream=target)


class FakePeerDevice:
    """Enough of a CUDA device for :func:`groute.engines.peer_barrier.unavailable`: a name, and whether
    it reaches every other device's memory (``peers``) with native atomics (``atomics``)."""

    def __init__(self, name, peers=True, atomics=True):
        self.name, self.peers, self.atomics = name, peers, atomics

    def can_access_peer(self, other):
        return self.peers

    def native_peer_atomics(self, other):
        return self.atomics


def fake_peer_context(k: int, *, peers=True, atomics=True, backend="cuda", ranks=None):
    """A stand-in Context of ``k`` :class:`FakePeerDevice` (``fake0``, ``fake1``...): what the
    checks of where the persistent kernels can run read from one, without any GPU.
    ``ranks``: the number of processes it spans (None: one, not a RankContext)."""
    return SimpleNamespace(backend=backend, ranks=None if ranks is None else SimpleNamespace(
                               size=ranks),
                           devices=[FakePeerDevice(f"fake{i}", peers, atomics) for i in range(k)])


#: the most CUDA devices a test asks for: with fewer GPUs (and at least one), conftest.py asks
#: for logical devices (groute.device.logical)
MOST_TEST_DEVICES = 4


def cuda_devices_for_tests() -> int:
    """How many CUDA devices a test can have here: the GPUs, or MOST_TEST_DEVICES when there
    are fewer and logical devices are asked for."""
    from groute.config import logical_devices_requested
    from groute.device import cuda_device_count
    found = cuda_device_count()
    if found and logical_devices_requested():
        return max(found, MOST_TEST_DEVICES)
    return found


def need_gpus(k: int, *, physical: bool = False):
    """Skip the calling test when this machine has fewer than ``k`` CUDA devices, GPUs or
    logical devices (the marks only say a test wants GPUs; how many there are is known at run
    time). ``physical``: ``k`` whole GPUs (a test of timings or of what links between GPUs
    do, which logical devices sharing a GPU cannot show)."""
    from groute.device import cuda_device_count
    found = cuda_device_count() if physical else cuda_devices_for_tests()
    if found < k:
        pytest.skip(f"needs {k} CUDA {'GPUs' if physical else 'devices'} (found {found})")


def skip_if_missing(backend: str, k: int):
    """Skip a :func:`device_cases` case whose backend has fewer than ``k`` devices here (CPU
    virtual devices are always there; CUDA GPUs may not be)."""
    if backend == "cuda":
        need_gpus(k)


def in_order(code: str, pieces) -> bool:
    """Whether ``pieces`` occur in ``code`` in this order, each after the end of the one before:
    a piece given twice in a row must occur twice."""
    at = 0
    for piece in pieces:
        at = code.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def busiest(g):
    """The vertex with the most out-arcs: a source whose search reaches much of the graph at
    once (the traversal tests' second source besides vertex 0)."""
    return int(np.argmax(np.diff(np.asarray(g.indptr))))


def check_every_partitioner(solver_cls, expected, g, k, partition):
    """The CPU case BFS and SSSP share for each (graph, device count, partitioner): one
    ``solver_cls`` on ``k`` virtual devices runs from vertex 0 and from the busiest vertex, and
    each answer equals ``expected(g, s)`` exactly. Returns the last result, for the app's own
    checks of its counters. METIS on several devices needs pymetis (skipped without it)."""
    if partition == "metis" and k > 1:
        pytest.importorskip("pymetis")
    with solver_cls(g, backend="cpu", devices=k, partition=partition, timeout=20) as solver:
        for source in (0, busiest(g)):
            res = solver.run(g.file_id_of(source))
            np.testing.assert_array_equal(res.values, expected(g, source))
    return res


def check_auto_mode_on_gpu(check, load, k=1):
    """The case BFS and SSSP share: with no ``mode`` given, ``check`` (the app's run-and-compare)
    on ``k`` GPUs picks the peer kernel (BSP) for ``load("kron:14")`` from its busiest vertex
    and async for ``load("grid:200")`` from vertex 0: one GPU's fused worker, on several the
    linked workers (exchange "peer"). Returns both results, for the app's own checks of what
    else ``auto`` chose."""
    need_gpus(k)
    kron, grid = load("kron:14"), load("grid:200")
    low = check(kron, busiest(kron), backend="cuda", devices=k, partition="contiguous")
    assert (low.stats["mode"], low.stats["exchange"]) == ("bsp", "peer")
    road = check(grid, 0, backend="cuda", devices=k, partition="contiguous")
    assert (road.stats["mode"], road.stats["exchange"]) == ("async", None if k == 1 else "peer")
    return low, road


def check_host_exchange_on_gpus(check, load, k, mode, routing):
    """The several-GPU case BFS and SSSP share: ``check`` (the app's run-and-compare with the
    reference) from the busiest vertex of ``load("kron:12")`` and ``load("grid:40")``, on
    ``k`` GPUs, contiguous and random partitions, through the host worklist exchange."""
    need_gpus(k)
    for spec in ("kron:12", "grid:40"):
        g = load(spec)
        for partition in ("contiguous", "random"):
            res = check(g, busiest(g), backend="cuda", devices=k, partition=partition, mode=mode,
                        worklist_tuning=WorklistTuning(routing=routing), timeout=30,
                        exchange="host")
            assert res.stats["exchange"] == "host", (spec, partition, res.stats["exchange"])


def same_sweeps(a, b) -> bool:
    """Whether two normalised PageRank answers come from the same float32 sweeps: equal up to
    the normalisation, whose sum adds each device's partial sum, so it differs in float64's
    last bits between device counts. A sweep that adds in another order differs by a float32
    ulp at least (6e-8 relative), far above the bound here."""
    return np.allclose(a, b, rtol=1e-12, atol=0)


def star(n=50_001):
    """The symmetric star of ``n`` vertices, vertex 0 linked to every other: with the default
    50k leaves a hub whose arcs the CUDA kernels share out in chunks (on several devices most
    of them remote)."""
    from groute.graph import CSRGraph
    return CSRGraph.from_edges(np.zeros(n - 1, np.int64), np.arange(1, n), n,
                               name="star").symmetrize()


def weighted_pagerank_case(seed: int):
    """A directed NetworkX graph of 402 vertices with arc weights ``w`` (uniform in 0.1-5),
    dangling vertices (by arcs and two isolated ones), a personalisation and a dangling
    distribution over some of its vertices: the weighted and personalised PageRank forms
    checked against NetworkX. Returns ``(G, personalization, dangling)``."""
    import random

    import networkx as nx
    G = nx.gnp_random_graph(400, 0.015, seed=seed, directed=True)
    rng = random.Random(seed)
    for u, v in G.edges:
        G[u][v]["w"] = rng.uniform(0.1, 5.0)
    G.add_nodes_from([400, 401])
    nodes = list(G)
    person = {v: 1.0 + (v % 5) for v in nodes[::3]}
    dangling = {v: 1.0 + (v % 2) for v in nodes[::7]}
    return G, person, dangling


def check_peer_exchange(solver_cls, k, graphs, expected, compare, *, mode="bsp", **options):
    """The peer-exchange case BFS and SSSP share: ``mode`` (BSP: the persistent level-synchronous
    kernels; async, two or more GPUs: the fused workers with device-initiated links) with
    ``exchange="peer"`` on ``k`` GPUs
    for every graph of ``graphs()`` (name -> graph, built once the skips have passed) with at
    least ``k`` vertices, under each partitioner (contiguous only on one GPU; METIS needs
    pymetis). One solver per graph and partitioner (``options`` added) runs from vertex 0, the
    busiest, the last and 0 again, so every run must start from clean state; each reports the
    peer exchange and passes ``compare(res, case)``, where ``case`` holds ``name``, ``graph``,
    ``source``, ``solver``, ``msg`` (for err_msg) and ``expected`` (``expected(graph,
    source)``, computed once per graph and source)."""
    need_gpus(k)
    if k > 1:
        pytest.importorskip("pymetis")
    for name, g in graphs().items():
        if g.num_vertices < k:
            continue
        sources = (0, busiest(g), g.num_vertices - 1, 0)
        answers = {s: expected(g, s) for s in set(sources)}
        for partition in ("contiguous", "metis", "random")[:3 if k > 1 else 1]:
            with solver_cls(g, backend="cuda", devices=k, partition=partition, mode=mode,
                            exchange="peer", timeout=30, **options) as solver:
                for source in sources:
                    res = solver.run(g.file_id_of(source))
                    compare(res, SimpleNamespace(name=name, graph=g, source=source, solver=solver,
                                                 msg=f"{name} {partition} source {source}",
                                                 expected=answers[source]))
                    assert (res.stats["exchange"], res.stats["mode"]) == ("peer", mode)


def check_peer_exchange_errors(solver_cls, g):
    """``exchange="peer"`` where it cannot run is a ValueError naming why, for BFS and SSSP
    alike: CPU devices (BSP and async on two), and async on one device (nothing to exchange)."""
    for mode in ("bsp", "async"):
        with pytest.raises(ValueError, match=f"{solver_cls.app}: exchange='peer' cannot run here: "
                                             f"it needs CUDA"):
            solver_cls(g, backend="cpu", devices=2, mode=mode, exchange="peer")
    with pytest.raises(ValueError, match="on one device exchanges nothing"):
        solver_cls(g, backend="cpu", devices=1, mode="async", exchange="peer")


def check_baseline_on_gpu(baseline, expected, load):
    """The plain-CuPy baseline test BFS and SSSP share: ``baseline(g, s)`` (a CuPy array) equals
    ``expected(g, s)`` (the CPU reference) from the busiest vertex of ``load("kron:10")`` and
    ``load("grid:30")``."""
    need_gpus(1)
    for spec in ("kron:10", "grid:30"):
        g = load(spec)
        s = busiest(g)
        np.testing.assert_array_equal(np.asarray(baseline(g, s).get()), expected(g, s))


def context_or_skip(backend: str, k: int, **kwargs):
    """A Context of ``k`` devices, or skip when the machine has fewer CUDA GPUs than that."""
    from groute import Context
    skip_if_missing(backend, k)
    return Context(k, backend=backend, **kwargs)


def public_names() -> dict:
    """Module -> the names groute documents as public there (their ``__all__``): what an
    algorithm written on the operator API may import."""
    import groute
    import groute.engines
    import groute.graph
    import groute.operators
    import groute.registry
    return {"groute": set(groute.__all__), "groute.operators": set(groute.operators.__all__),
            "groute.engines": set(groute.engines.__all__),
            "groute.graph": set(groute.graph.__all__),
            "groute.registry": set(groute.registry.__all__)}


def check_imports_only_public_names(path):
    """Every ``groute`` import of the file ``path`` is a public module and one of its public
    names (:func:`public_names`), absolute; and every public name exists."""
    import ast
    public = public_names()
    where = f"{Path(path).parent.name}/{Path(path).name}"
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{where} line {node.lineno}: a relative import"
            if node.module.split(".")[0] != "groute":
                continue
            assert node.module in public, \
                f"{where} line {node.lineno}: {node.module} is not a public module"
            for alias in node.names:
                assert alias.name in public[node.module], \
                    f"{where} line {node.lineno}: {node.module}.{alias.name} is not public"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] != "groute" or alias.name in public, \
                    f"{where} line {node.lineno}: import {alias.name}"
    for module, names in public.items():
        mod = __import__(module, fromlist=["_"])
        for name in names:
            assert getattr(mod, name) is not None, f"{module}.{name}"


def operator_doc_blocks() -> list[str]:
    """The ```python blocks of the operator docs, docs/OPERATORS.md (the tutorial) then
    docs/OPERATORS_REFERENCE.md, in order: their worked examples, which the tests run."""
    import re
    docs = Path(__file__).resolve().parents[1] / "docs"
    return [block for name in ("OPERATORS.md", "OPERATORS_REFERENCE.md")
            for block in re.findall(r"```python\n(.*?)```", (docs / name).read_text(), re.S)]


def compile_generated(functors, tmp_path, files=()):
    """Compile the kernels :mod:`groute.operators.generated` makes for each of ``functors``
    (and the fixed ``.cu`` ``files``) to PTX in one nvcc run, so a CUDA body's syntax and type
    errors show without a GPU. One translation unit, each functor's module in a namespace of
    its own with its kernels renamed (their names are C symbols, the same in every module):
    nvcc parses the CUDA headers once instead of once per functor. Returns nvcc's
    CompletedProcess."""
    import re
    import subprocess
    from groute.kernels import HEADER_DIRS
    from groute.operators import direction
    from groute.operators.generated import source
    lines = ['#include "advance.cuh"', '#include "combine.cuh"', '#include "frontier.cuh"']
    for i, functor in enumerate(functors):
        text = source(functor, "test")
        kernels = re.findall(r"__global__ void (\w+)\(", text)
        lines += [f"#define {k} groute_test{i}_{k}" for k in kernels]
        lines += [f"namespace groute_test{i} {{", text, "}"]
        lines += [f"#undef {name}" for name in kernels + re.findall(r"#define (\w+)", text)]
    lines += [f'#include "{Path(f).resolve()}"' for f in files]
    path = tmp_path / "functors.cu"
    path.write_text("\n".join(lines))
    return subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-I{HEADER_DIRS[0]}",
                           *direction.compile_options(), "--ptx", str(path), "-o",
                           str(tmp_path / "functors.ptx")],
                          capture_output=True, text=True, timeout=200)
