"""The facade: ``import groute`` is cheap, the one-shot functions are the apps' own, the version
is one, the registry serves the CLI and the demo, and an uninstalled checkout finds
``groute.apps``."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import groute
from groute import registry
from groute._checkout import CheckoutFinder, add_checkout_finder
from groute.cli import main
from groute.graph import load_graph, reference, shipped_graph_path

ROOT = Path(__file__).resolve().parents[1]


def test_import_groute_loads_no_algorithm_scipy_or_cupy():
    script = "import sys, json, groute; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "groute.runtime.context" in loaded                    # the dataflow API is there
    heavy = [m for m in loaded
             if m.split(".")[0] in ("cupy", "scipy", "networkx", "apps", "topology")
             or m.startswith(("groute.apps", "groute.topology", "groute.graph", "groute.bench"))]
    assert heavy == []


@pytest.mark.parametrize("name, module", [("bfs", "groute.apps.bfs"), ("sssp", "groute.apps.sssp"),
                                          ("pagerank", "groute.apps.pr"),
                                          ("connected_components", "groute.apps.cc"),
                                          ("pbf", "groute.apps.pbf")])
def test_facade_functions_are_the_apps_own(name, module):
    import importlib
    assert getattr(groute, name) is getattr(importlib.import_module(module), name)
    assert name in dir(groute) and name in groute.__all__


def test_facade_function_runs():
    g = load_graph("grid:6")
    result = groute.bfs(g, 0, backend="cpu", devices=2, partition="contiguous")
    assert np.array_equal(result.values, reference.bfs(g, 0))
    labels = groute.connected_components(g, backend="cpu", devices=1)
    assert np.array_equal(labels.values, reference.connected_components(g))


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        groute.no_such_thing  # noqa: B018


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"groute {groute.__version__}"
    # pyproject.toml takes the version from groute.__version__, so there is one
    assert 'version = { attr = "groute.__version__" }' in (ROOT / "pyproject.toml").read_text()


def test_the_facade_names_no_algorithm():
    """Item 2 of the issue: the facade is the public surface only; the algorithms register
    themselves, so groute/__init__.py names none of them (nor their bench records)."""
    import ast
    tree = ast.parse((ROOT / "groute" / "__init__.py").read_text())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    words = {node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and id(node) not in docstrings}
    words |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    code = " ".join(words)
    for name in ("bfs", "sssp", "pagerank", "core_number", "betweenness", "kcore", "baseline"):
        assert name not in code


def test_from_groute_import_star_brings_the_functions():
    scope = {}
    exec("from groute import *", scope)
    assert scope["bfs"] is groute.bfs and scope["Link"] is groute.Link


def test_demo_runs_every_registered_app_verified(tmp_path, capsys):
    graph = tmp_path / "power.mtx.gz"            # a copy: the demo's caches go next to it
    shutil.copy(shipped_graph_path(), graph)
    assert main(["demo", "--backend", "cpu", "--devices", "2", "--graph", str(graph)]) == 0
    out = capsys.readouterr().out
    assert "all results verified" in out
    for name in ("pbf", *registry.ALGORITHMS):
        assert f"  {name} " in out


def test_checkout_finder_maps_only_the_top_level_subpackages():
    finder = CheckoutFinder(ROOT)
    spec = finder.find_spec("groute.apps")
    assert Path(spec.origin) == ROOT / "apps" / "__init__.py"
    assert spec.submodule_search_locations == [str(ROOT / "apps")]
    assert Path(finder.find_spec("groute.topology").origin) == ROOT / "topology" / "__init__.py"
    for name in ("apps", "topology", "groute.graph", "groute.apps.bfs", "groute.tests"):
        assert finder.find_spec(name) is None


def test_checkout_finder_only_in_a_checkout(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    (tmp_path / "groute").mkdir()
    for name in ("apps", "topology"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    assert not add_checkout_finder(tmp_path / "groute")          # no pyproject.toml: not a checkout
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "groute" / "apps").mkdir()                       # installed layout inside groute/
    assert not add_checkout_finder(tmp_path / "groute")
    (tmp_path / "groute" / "apps").rmdir()
    before = len(sys.meta_path)
    assert add_checkout_finder(tmp_path / "groute")
    assert add_checkout_finder(tmp_path / "groute")              # once only
    assert len(sys.meta_path) == before + 1
    assert sys.meta_path[-1].root == tmp_path
