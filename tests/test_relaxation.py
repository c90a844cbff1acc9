"""The relaxation contract (groute.engines.Relaxation) proved by a relaxation that is neither
BFS nor SSSP: docs/OPERATORS_REFERENCE.md's "fewest hops over arcs of weight at most a limit",
written on public names only, against NetworkX on the filtered graph (CPU devices, BSP and
async), and its CUDA through the fused, linked and peer kernels with nvcc (no GPU needed). Also the contract's
checks of bad input and the generated headers that keep two relaxations' modules apart."""
import re
import shutil
import subprocess
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from groute import kernels
from groute.engines import Relaxation, RelaxSolver, value_add, value_inf
from groute.graph import load_graph
from support import check_imports_only_public_names, operator_doc_blocks

ROOT = Path(__file__).resolve().parents[1]
RELAX = ROOT / "groute" / "engines" / "relax"
#: the documented example: the block that defines light_hops
BLOCK = next(b for b in operator_doc_blocks() if "def light_hops" in b)
LIMIT = 5


@pytest.fixture(scope="module")
def example():
    names = {}
    exec(compile(BLOCK, "OPERATORS_REFERENCE.md (light_hops)", "exec"), names)
    return names


def weighted_graph(seed=3, n=60, m=240):
    """A directed NetworkX graph with integer weights 1..10 on its arcs."""
    rng = np.random.default_rng(seed)
    G = nx.gnm_random_graph(n, m, seed=seed, directed=True)
    for u, v in G.edges:
        G[u][v]["weight"] = int(rng.integers(1, 11))
    return G


def light_reference(G, source, limit):
    """Hops from ``source`` over the arcs of weight <= ``limit`` (NetworkX on that subgraph)."""
    H = nx.DiGraph()
    H.add_nodes_from(G)
    H.add_edges_from((u, v) for u, v, w in G.edges(data="weight") if w <= limit)
    return nx.single_source_shortest_path_length(H, source)


def test_the_example_uses_only_public_names(tmp_path):
    path = tmp_path / "light_hops.py"
    path.write_text(BLOCK)
    check_imports_only_public_names(path)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["bsp", "async"])
@pytest.mark.parametrize("k", [1, 3])
def test_light_hops_matches_networkx_on_the_filtered_graph(example, k, mode):
    G = weighted_graph()
    g = load_graph(G, weight="weight")
    with example["LightHops"](g, backend="cpu", devices=k, partition="random", mode=mode,
                              timeout=20) as solver:
        assert solver.unit_step is False and solver.rules["mode"].option == "mode"
        for source in (0, 7):
            result = solver.run(source, predecessors=True)
            want = light_reference(G, source, LIMIT)
            assert result.to_dict() == want, (source, k, mode)
            assert result.stats["app"] == "light_hops"
            # every parent arc is light and one hop shorter
            for v, u in result.to_predecessors().items():
                assert G[u][v]["weight"] <= LIMIT and want[u] + 1 == want[v]
    assert any(w > LIMIT for _, _, w in G.edges(data="weight"))   # the filter matters


@pytest.mark.timeout(60)
def test_a_relaxation_that_offers_nothing_on_purpose_is_not_taken_for_an_overflow(example):
    """Weights huge enough that SSSP would have to check its distances: a heavy arc's
    "unreached" offer is this relaxation's answer, not a float32 sum that overflowed (only an
    app that sets ``checks_overflow``, SSSP, is checked)."""
    G = nx.DiGraph()
    G.add_nodes_from(range(10))
    G.add_weighted_edges_from([(0, 1, 1.0), (1, 2, 1.0), (0, 3, 1e38)])
    g = load_graph(G, weight="weight")
    with example["LightHops"](g, backend="cpu", devices=1, timeout=20) as solver:
        assert solver.overflow_possible and not solver.checks_overflow
        assert solver.run(0).to_dict() == {0: 0, 1: 1, 2: 2}


@pytest.mark.timeout(60)
def test_light_hops_on_a_graph_without_weights_is_bfs(example):
    """Every w is 1 there: the relaxation adds one per arc (adds_one), as BFS does."""
    G = weighted_graph(seed=5)
    g = load_graph(nx.DiGraph(G.edges), weight=None)
    with example["LightHops"](g, backend="cpu", devices=2, partition="random", mode="bsp",
                              timeout=20) as solver:
        assert solver.unit_step is True
        assert solver.run(0).to_dict() == nx.single_source_shortest_path_length(G, 0)


def test_each_relaxation_has_a_header_and_folder_of_its_own(example):
    light, other = example["light_hops"](LIMIT), example["light_hops"](LIMIT + 1)
    assert light.include_dir == example["light_hops"](LIMIT).include_dir
    assert light.include_dir != other.include_dir
    header = (light.include_dir / "relaxation.cuh").read_text()
    assert header == light.header() and "w <= 5 ? value_add(d, 1) : VALUE_INF" in header
    # the cache key of a module digests the generated header it includes
    kernel = RELAX / "fused.cu"
    source = kernel.read_text()
    assert kernels._includes_digest(kernel, source, (light.include_dir,)) != \
        kernels._includes_digest(kernel, source, (other.include_dir,))


def test_bfs_and_sssp_generate_the_arc_value_the_kernels_had():
    from groute.apps.bfs import HOPS
    from groute.apps.sssp import DISTANCE
    assert "return (value_add(d, 1));" in HOPS.header() and "weights[e]" not in HOPS.header()
    assert "const weight_t w = weights[e];" in DISTANCE.header()
    assert "return (value_add(d, w));" in DISTANCE.header()


def test_the_contract_names_what_is_wrong():
    hops = lambda d, w: value_add(d, 1)   # noqa: E731
    with pytest.raises(ValueError, match="reads w but weighted is False"):
        Relaxation(name="x", cuda="value_add(d, w)", numpy=hops)
    with pytest.raises(ValueError, match="unit .* and weighted exclude"):
        Relaxation(name="x", cuda="value_add(d, w)", numpy=hops, weighted=True, unit=True)
    with pytest.raises(ValueError, match=r"unit says every arc adds one, but .*\[2, 7\]"):
        Relaxation(name="x", cuda="value_add(d, 2)", numpy=lambda d, w: value_add(d, 2), unit=True)
    with pytest.raises(ValueError, match="cuda must be one C expression"):
        Relaxation(name="x", cuda="value_add(d, 1); return 0", numpy=hops)
    with pytest.raises(TypeError, match="numpy must be a function"):
        Relaxation(name="x", cuda="value_add(d, 1)", numpy="d + 1")
    with pytest.raises(ValueError, match="name"):
        Relaxation(name="two words", cuda="value_add(d, 1)", numpy=hops)
    with pytest.raises(TypeError, match="RelaxSolver.relaxation must be a"):
        RelaxSolver(load_graph("grid:4", cache=False), backend="cpu", devices=1)


def test_the_contract_tries_numpy_on_a_sample():
    """A NumPy twin that gives no array of one offer per arc, or offers less than the tail's
    value (a cycle would never settle), is an error when the relaxation is made, not a failure
    inside a device's worker or a run that never ends."""
    with pytest.raises(ValueError, match=r"numpy\(d, w\) must give one offer per arc .*got 2"):
        Relaxation(name="x", cuda="value_add(d, 2)", numpy=lambda d, w: 2)
    with pytest.raises(ValueError, match=r"one offer per arc .*shape \(1,\)"):
        Relaxation(name="x", cuda="value_add(d, 2)", numpy=lambda d, w: value_add(d, 2)[:1])
    with pytest.raises(ValueError, match="below the tail's value"):
        Relaxation(name="x", cuda="d - 1", numpy=lambda d, w: d - 1)
    with pytest.raises(ValueError, match="below the tail's value"):
        Relaxation(name="x", cuda="d - w", numpy=lambda d, w: d - w, weighted=True)


def test_value_helpers_saturate_and_offer_nothing_as_the_kernels_do():
    big = np.array([0, 2**31 - 3], dtype=np.int32)
    assert value_add(big, 5).tolist() == [5, 2**31 - 2]          # one below "unreached"
    assert value_add(big, 5).dtype == np.int32
    assert value_inf(big) == 2**31 - 1
    f = np.array([1.5], dtype=np.float32)
    assert value_add(f, 2).dtype == np.float32 and value_inf(f) == np.inf


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
@pytest.mark.parametrize("kind", ["int", "float"])
def test_light_hops_compiles_into_every_kernel(example, kind):
    """The fused worker (through linked.cu, which includes it) and the peer kernels compile
    with the relaxation's header, for int and float weights."""
    from groute.engines.relax.cuda_worker import traversal_options
    light = example["LightHops"].relaxation
    for kernel in ("linked.cu", "peer.cu"):
        done = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{RELAX}", f"-I{light.include_dir}",
             f"-I{kernels.HEADER_DIRS[0]}", *traversal_options(kind, True, False), "-DBLOCK=256",
             "--ptx", str(RELAX / kernel), "-o", "/dev/null"],
            capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, (kernel, done.stderr[-3000:])


#: the one-device fused worker's builds: (app, value kind, weighted, unit step)
ONE_DEVICE_BUILDS = [("bfs", "int", False, True), ("sssp", "int", True, False),
                     ("sssp", "float", True, False)]


def _one_device_build(app, kind, weighted, unit):
    """The relaxation and compile options of the fused worker on one device (BATCH, the
    default tuning), as CUDATraversalWorker builds them (cuda_worker.fused_options)."""
    from groute.apps.bfs import HOPS
    from groute.apps.sssp import DISTANCE
    from groute.engines.relax.cuda_worker import fused_options
    from groute.tuning import TraversalTuning
    options = fused_options(kind, weighted, unit, TraversalTuning(), batch=True)
    return (HOPS if app == "bfs" else DISTANCE), options


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
@pytest.mark.parametrize("app,kind,weighted,unit", ONE_DEVICE_BUILDS)
def test_the_one_device_fused_kernel_does_not_spill(app, kind, weighted, unit):
    """The fused worker's kernel as one device runs it (BATCH), built as a cooperative launch
    builds it (relocatable device code) and as the fallback does (plain): ptxas keeps its rounds
    in registers (fused.cuh's RESIDENT_BOUNDS), where a cap of its own choosing had spilled
    SSSP's batched relaxation to local memory in the plain build; the run's start (reset_fused,
    place_seeds_fused) compiles with it, without spilling either."""
    relaxation, options = _one_device_build(app, kind, weighted, unit)
    for build in ((), ("-rdc=true",)):
        done = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", *build, "-Xptxas", "-v",
             f"-I{RELAX}", f"-I{relaxation.include_dir}", f"-I{kernels.HEADER_DIRS[0]}",
             *options, str(RELAX / "fused.cu"), "-o", "/dev/null"],
            capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        for kernel in ("traverse", "reset_fused", "place_seeds_fused"):
            found = re.search(rf"Function properties for {kernel}\n\s*(\d+) bytes stack frame, "
                              r"(\d+) bytes spill stores, (\d+) bytes spill loads", done.stderr)
            assert found, (kernel, done.stderr[-3000:])
            assert found.group(2) == found.group(3) == "0", (build, found.group(0))


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
@pytest.mark.parametrize("app,kind,weighted,unit", ONE_DEVICE_BUILDS)
def test_the_linked_kernel_compiles_for_every_app_without_spilling(app, kind, weighted, unit):
    """The linked workers' kernel (``traverse_linked``, linked.cu) for BFS and SSSP with int
    and float values, built as LinkedTraversal loads it (its options, cooperative: relocatable
    device code): it compiles, and its start (the reset of its own state, the seeds) and its
    rounds keep to registers beyond the bookkeeper's per-peer arrays (no spill stores)."""
    from groute.engines.relax.linked import linked_options
    relaxation, _ = _one_device_build(app, kind, weighted, unit)
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-rdc=true", "-Xptxas", "-v",
         f"-I{RELAX}", f"-I{relaxation.include_dir}", f"-I{kernels.HEADER_DIRS[0]}",
         *linked_options(kind, weighted, unit), str(RELAX / "linked.cu"), "-o", "/dev/null"],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"Function properties for traverse_linked\n\s*(\d+) bytes stack frame, "
                      r"(\d+) bytes spill stores, (\d+) bytes spill loads", done.stderr)
    assert found, done.stderr[-3000:]
    assert found.group(2) == found.group(3) == "0", found.group(0)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("app,kind,weighted,unit", ONE_DEVICE_BUILDS)
def test_the_fused_kernel_the_runtime_compiles_has_no_local_memory(app, kind, weighted, unit):
    """The same kernel compiled as the worker loads it on this GPU (NVRTC through CuPy,
    cooperative, and the plain fallback): no local memory, so no spill in its rounds."""
    from groute.engines.relax.cuda_worker import KERNEL
    relaxation, options = _one_device_build(app, kind, weighted, unit)
    for cooperative in (True, False):
        try:
            module = kernels.load_module(KERNEL, options=options, cooperative=cooperative,
                                         include=(relaxation.include_dir,))
            fn = module.get_function("traverse")
        except Exception:  # noqa: BLE001 - no device runtime to link: the worker falls back
            assert cooperative, "the plain build must load"
            continue
        assert fn.local_size_bytes == 0, (cooperative, fn.num_regs, fn.local_size_bytes)
