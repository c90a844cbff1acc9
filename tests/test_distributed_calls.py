"""Every rank of a job must make the same calls with the same arguments: a public function on
a context spanning processes, and loading a graph by ranks, check it (one allgather of the
arguments' descriptions) and raise on every rank where the ranks differ, naming what differs,
instead of going on into collectives that do not match. The descriptions and the message are
checked on a stand-in for the ranks; the calls, as real processes under a timeout."""
import re

import numpy as np
import pytest

from groute.runtime import ranks as ranks_module
from groute.runtime.ranks import describe_argument

from mpi_support import needs_mpi, program, run_ranks


def ranks_seeing(*others):
    """A stand-in for rank 0 of a job whose other ranks passed ``others`` (their call's name
    and argument descriptions, as the allgather brings them)."""
    r = object.__new__(ranks_module.Ranks)
    r.allgather = lambda mine, what: [mine, *others]
    return r


def test_same_arguments_pass_and_different_ones_are_named():
    args = {"source": 0, "mode": "bsp"}
    described = {k: describe_argument(v) for k, v in args.items()}
    ranks_seeing(("bfs()", described), ("bfs()", described)).check_same_call("bfs()", args)
    other = dict(described, source=describe_argument(5))
    with pytest.raises(ValueError, match=r"bfs\(\) was called with different arguments on the "
                                         r"ranks of one job \(source: 0 on ranks 0, 2; 5 on "
                                         r"rank 1\)"):
        ranks_seeing(("bfs()", other), ("bfs()", described)).check_same_call("bfs()", args)
    with pytest.raises(ValueError, match=r"different calls at once \(bfs\(\) on rank 0; "
                                         r"sssp\(\) on rank 1\)"):
        ranks_seeing(("sssp()", described)).check_same_call("bfs()", args)
    with pytest.raises(ValueError, match=r"cutoff: \(not given\) on rank 0; 3 on rank 1"):
        ranks_seeing(("bfs()", dict(described, cutoff="3"))).check_same_call("bfs()", args)


def test_descriptions_are_equal_across_processes_where_the_values_are():
    a = np.arange(10)
    assert describe_argument(a) == describe_argument(a.copy()) != describe_argument(a + 1)
    # an object's address and a set's order (by the process's hash seed) differ between
    # processes: neither is in the description
    assert describe_argument(object()) == describe_argument(object())
    assert describe_argument(frozenset(["b", "a"])) == "{'a', 'b'}"
    assert len(describe_argument("x" * 1000)) < 200


@needs_mpi
def test_calls_that_differ_between_ranks_are_refused_on_every_rank():
    done = run_ranks(3, [program("call_checks.py"), 20], timeout=90)
    assert done.returncode == 0, done.stderr
    for r in range(3):
        out = dict(re.findall(rf"rank {r} (\w+): (.*)", done.stdout))
        assert out["load"] == ("load_graph() was called with different arguments on the ranks "
                               "of one job (source: 'grid:6' on ranks 0, 2; 'grid:7' on rank 1); "
                               "every rank must make the same calls with the same arguments"), out
        assert "(source: 0 on ranks 0, 2; 5 on rank 1)" in out["source"], out
        assert "(bfs() on ranks 0, 2; sssp() on rank 1)" in out["app"], out
        # rank 1's arc, named alike on every rank (the others waited for the timeout)
        assert re.fullmatch(r"sssp: the weight of arc \d+ -> \d+ is negative \(-5\); sssp "
                            r"needs weights >= 0", out["weight"]), out
        assert out["then"] == "the same calls answer, 10 levels", out


def test_a_dict_made_in_another_order_or_a_numpy_scalar_is_the_same_argument():
    """A dict's insertion order follows the process's hash seed where it was made from a set of
    strings (it differs between ranks), and ``np.float64(0.1)`` is the number ``0.1``: neither
    makes two ranks' same call differ; a different value does, small or large."""
    keys = [f"v{i}" for i in range(10)]
    ahead = {k: 1.0 for k in keys}
    behind = {k: 1.0 for k in reversed(keys)}
    assert describe_argument(ahead) == describe_argument(behind)
    assert describe_argument(dict(ahead, v3=2.0)) != describe_argument(ahead)
    assert describe_argument(np.float64(0.1)) == describe_argument(0.1)
    assert describe_argument([np.int64(3)]) == describe_argument([3])
    many = [f"v{i}" for i in range(10_000)]
    big_ahead = {k: i for i, k in enumerate(many)}
    big_behind = {k: big_ahead[k] for k in reversed(many)}
    assert describe_argument(big_ahead) == describe_argument(big_behind)
    assert "10000 items" in describe_argument(big_ahead)
    assert describe_argument(dict(big_ahead, v7=-1)) != describe_argument(big_ahead)
    assert describe_argument(set(many)) == describe_argument(set(reversed(many)))
    t = np.arange(12.0).reshape(3, 4)
    assert describe_argument(t.T) == describe_argument(np.ascontiguousarray(t.T))


def test_a_large_collection_is_the_same_argument_whatever_the_hash_seed_or_its_order():
    """Nested sets, a set of frozensets made in another order, shared items and NumPy scalars
    in a collection of 4096+ items describe alike in processes of other hash seeds, as small
    ones do; a different item still differs."""
    import subprocess
    import sys
    code = ("from groute.runtime.ranks import describe_argument as d; import numpy as np\n"
            "n = 5000\n"
            "print(d([{f'a{i}', f'b{i}'} for i in range(n)]))\n"
            "print(d({frozenset({i, i + 1}) for i in range(n)}))\n"
            "print(d({f'v{i}': float(i) for i in range(n)}))\n")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env={**__import__("os").environ,
                                            "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")}
    assert len(seen) == 1 and "5000 items" in next(iter(seen)), seen
    n = 5000
    forward = {frozenset({i, i + 1}) for i in range(n)}
    backward = {frozenset({i, i + 1}) for i in reversed(range(n))}
    assert describe_argument(forward) == describe_argument(backward)
    assert describe_argument([np.float64(0.5)] * n) == describe_argument([0.5] * n)
    shared = "s" * 10
    assert describe_argument([shared] * n) == describe_argument(["s" * 10 for _ in range(n)])
    assert describe_argument(list(range(n))) != describe_argument([*range(n - 1), -1])


def test_a_whole_graph_on_ranks_is_refused_alike_by_every_app_that_needs_its_ranges():
    """CC, PageRank and k-core run each rank's rows of a graph loaded by ranks: a whole graph
    is a ValueError on every rank naming the solver and distributed.load_graph (CC and
    PageRank failed with AttributeErrors deep inside), and the context goes on; BFS runs a
    whole graph there, its parents too (they failed after the traversal)."""
    done = run_ranks(2, [program("whole_graph_checks.py")], timeout=90)
    assert done.returncode == 0, done.stderr
    for rank in range(2):
        for name, what in (("cc", "CC"), ("pagerank", "PageRank"), ("kcore", "the bsp engine")):
            assert re.search(rf"rank {rank} {name}: refused: {what} on a context spanning "
                             rf"processes runs a graph loaded by ranks "
                             rf"\(groute\.distributed\.load_graph\).*got CSRGraph",
                             done.stdout), done.stdout
        assert f"rank {rank} then: same" in done.stdout, done.stdout
        assert f"rank {rank} bfs parents: same" in done.stdout, done.stdout
