"""Algorithms register themselves where they are defined (:mod:`groute.registry`): the shipped
ones are found by importing ``groute.apps`` on first use, and a new algorithm in a package of
its own reaches ``groute.<function>``, the command line and ``groute bench`` without a line
anywhere else."""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

import groute
from groute import registry
from groute.bench.specs import SPECS, load, spec_for
from groute.cli import main

SHIPPED = {"bfs", "sssp", "pr", "cc", "kcore", "betweenness", "scc"}


@pytest.fixture
def isolated_registry(monkeypatch):
    """The registry's tables and packages, restored after the test."""
    for table in (registry.ALGORITHMS, registry.FUNCTIONS, registry.COMMANDS):
        monkeypatch.setattr(table, "_entries", dict(table._entries))
    monkeypatch.setattr(registry, "_PACKAGES", list(registry._PACKAGES))
    monkeypatch.setattr(registry, "_found", set(registry._found))
    yield registry


def test_the_shipped_algorithms_register_themselves():
    assert set(registry.ALGORITHMS) == SHIPPED
    for name, algorithm in registry.ALGORITHMS.items():
        # the solver and the one-shot function are the module's own, and the function is public
        assert algorithm.module.startswith("groute.apps.")
        assert algorithm.solver.__module__ == algorithm.module
        assert getattr(groute, algorithm.function.__name__) is algorithm.function
    for name in ("shortest_path", "katz_centrality", "pbf"):        # plain public functions
        assert registry.function(name) is getattr(groute, name)
    commands = {key.rpartition(".")[0] for key in registry.COMMANDS}
    assert {"groute.apps.bfs", "groute.apps.pr", "groute.apps.kcore_cli", "groute.apps.pbf"} <= commands


def test_every_hook_of_the_bench_specs_exists():
    assert set(SPECS) <= set(registry.ALGORITHMS)
    for name, spec in SPECS.items():
        hooks = [spec.reference, spec.baseline, spec.baseline_setup, spec.floor,
                 *(spec.peers or {}).values()]
        for hook in filter(None, hooks):
            assert callable(load(hook)), (name, hook)
    assert spec_for("kcore").baseline is None          # k-core has no plain-CuPy baseline
    assert spec_for("no_such_algorithm").reference is None


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match="no algorithm 'nope' is registered; known: .*bfs"):
        registry.algorithm_named("nope")
    with pytest.raises(KeyError, match="no function 'nope' is registered; known: .*pagerank"):
        registry.function("nope")


MODULE = '''
"""A new algorithm in a package of its own: out-degree, with a solver and a subcommand."""
import numpy as np

from groute.registry import algorithm, command
from groute.results import AppResult


class OutDegree:
    def __init__(self, graph, ctx=None, **options):
        self.graph = graph

    def run(self):
        return AppResult(np.diff(np.asarray(self.graph.indptr)), 0.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@algorithm("outdeg", solver=OutDegree, label="out-degree", takes_partition=False)
def out_degree(graph, **options):
    with OutDegree(graph, **options) as solver:
        return solver.run()


@command
def register(subparsers, common):
    p = subparsers.add_parser("outdeg", parents=[common], help="out-degree of every vertex")
    p.set_defaults(func=lambda args: print("outdeg ran") or 0)
'''


def test_a_new_algorithm_needs_no_central_edit(isolated_registry, tmp_path, monkeypatch, capsys):
    package = tmp_path / "myalgos"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "outdeg.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "myalgos", raising=False)
    monkeypatch.delitem(groute.__dict__, "out_degree", raising=False)

    registry.search("myalgos")
    assert registry.ALGORITHMS["outdeg"].label == "out-degree"
    from groute.graph import load_graph
    g = load_graph("grid:3")
    assert np.array_equal(groute.out_degree(g).values, np.diff(np.asarray(g.indptr)))
    groute.__dict__.pop("out_degree", None)          # the facade keeps what it looked up

    assert main(["outdeg"]) == 0
    assert "outdeg ran" in capsys.readouterr().out

    # groute bench knows it, and says plainly that it has nothing to check it against
    from groute.bench import make_config, run_suite
    config = make_config(apps=["outdeg"], graphs=["grid:4"], devices=[1], backend="cpu",
                         peers=[], repeat=1)
    results = run_suite(config, progress=False)
    assert results["apps"]["outdeg"]["status"] == "n/a"
    assert "no reference" in results["apps"]["outdeg"]["note"]


def test_two_algorithms_of_one_name_are_an_error(isolated_registry):
    def first(graph):
        return graph

    def second(graph):
        return graph
    second.__qualname__ = "elsewhere"
    registry.algorithm("dup", solver=object)(first)
    with pytest.raises(ValueError, match="two algorithms named 'dup'"):
        registry.algorithm("dup", solver=object)(second)


def test_a_module_that_fails_to_import_names_itself(isolated_registry, tmp_path, monkeypatch):
    package = tmp_path / "brokenalgos"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bad.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.search("brokenalgos")
    with pytest.raises(ImportError, match="brokenalgos.bad"):
        list(registry.ALGORITHMS)
