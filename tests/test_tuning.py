"""The engines' tuning objects and the one reader of the GROUTE_* environment (groute.tuning)."""
import dataclasses
import re
from pathlib import Path

import pytest

from groute.tuning import (VARIABLES, CCTuning, PageRankTuning, TraversalTuning, WorklistTuning,
                           read_environment, setting)
from support import graph_from

ROOT = Path(__file__).resolve().parents[1]
TUNINGS = {cls.__name__: cls for cls in (TraversalTuning, PageRankTuning, CCTuning)}
#: a text each parser takes that is not its variable's default
SAMPLES = {"GROUTE_TIMEOUT": ("7.5", 7.5), "GROUTE_DATA_DIR": ("/tmp/x ", "/tmp/x"),
           "GROUTE_DATASETS": ("reg.json", "reg.json"), "GROUTE_COMMIT": ("abc123\n", "abc123"),
           "GROUTE_PEER_BARRIER_TIMEOUT": ("0.5", 0.5), "GROUTE_TRAVERSAL_BLOCK": ("128", 128),
           "GROUTE_TRAVERSAL_BLOCKS_PER_SM": ("2", 2), "GROUTE_TRAVERSAL_NARROW": ("33", 33),
           "GROUTE_TRAVERSAL_ADAPTIVE": ("0", False), "GROUTE_TRAVERSAL_BATCH": ("1", True),
           "GROUTE_TRAVERSAL_BARRIER": ("0", False), "GROUTE_TRAVERSAL_SPIN_NS": ("100", 100),
           "GROUTE_TRAVERSAL_PULL": ("0", False), "GROUTE_TRAVERSAL_BIGCHECK": ("1", True),
           "GROUTE_PEER_BLOCKS": ("264", 264), "GROUTE_LINKED_BLOCKS": ("66", 66),
           "GROUTE_PEER_MAX_ROUNDS": ("9", 9), "GROUTE_PEER_TRACE": ("1", True),
           "GROUTE_PEER_REFRESH": (" 0.25", 0.25),
           "GROUTE_PR_TRACE": ("1", True), "GROUTE_PR_PUSH_RULE": (" Degree", "degree"),
           "GROUTE_LOGICAL_DEVICES": ("yes", True),
           "GROUTE_CACHE_DIR": ("/tmp/c", "/tmp/c"), "GROUTE_RANK_TRANSPORT": (" NCCL", "nccl"),
           "GROUTE_ANSWER_KEEP_BYTES": ("0", 0)}


def test_every_variable_is_read_and_sets_its_field():
    """Each variable parses to its value; a tuning variable sets its field and nothing else."""
    assert set(SAMPLES) == {v.name for v in VARIABLES}
    env = {name: text for name, (text, _) in SAMPLES.items()}
    values = read_environment(env)
    assert values == {name: value for name, (_, value) in SAMPLES.items()}
    for var in VARIABLES:
        assert setting(var.name, {}) == var.default
        if var.tuning is None:
            continue
        cls, field = var.tuning.split(".")
        tuning = TUNINGS[cls].from_environment({var.name: SAMPLES[var.name][0]})
        assert getattr(tuning, field) == SAMPLES[var.name][1] != var.default
        others = {f.name for f in dataclasses.fields(tuning)} - {field}
        assert all(getattr(tuning, f) == getattr(TUNINGS[cls](), f) for f in others)


def test_defaults_agree_with_the_classes():
    """A tuning variable's documented default is its field's default."""
    for var in VARIABLES:
        if var.tuning:
            cls, field = var.tuning.split(".")
            assert getattr(TUNINGS[cls](), field) == var.default, var.name


def test_unset_and_empty_mean_the_default():
    assert TraversalTuning.from_environment({}) == TraversalTuning()
    assert TraversalTuning.from_environment({"GROUTE_TRAVERSAL_BLOCKS_PER_SM": "",
                                             "GROUTE_PEER_BLOCKS": "0"}) == TraversalTuning()


@pytest.mark.parametrize("name, text", [("GROUTE_TRAVERSAL_BLOCK", "big"),
                                        ("GROUTE_PEER_TRACE", "yes"),
                                        ("GROUTE_PEER_BARRIER_TIMEOUT", "-1"),
                                        ("GROUTE_TIMEOUT", "inf"),
                                        ("GROUTE_PEER_MAX_ROUNDS", "0"),
                                        ("GROUTE_PR_PUSH_RULE", "hubs"),
                                        ("GROUTE_RANK_TRANSPORT", "ucx"),
                                        ("GROUTE_PEER_REFRESH", "2"),
                                        ("GROUTE_PEER_REFRESH", "always")])
def test_a_bad_value_names_the_variable(name, text):
    with pytest.raises(ValueError, match=f"environment variable {name}={text!r}"):
        read_environment({name: text})


def test_a_bad_variable_stops_only_what_reads_it(capsys):
    """Every reader parsed every variable: a bad GROUTE_TIMEOUT failed `groute data list`
    (which waits on nothing) and a command given --timeout, which the variable only defaults."""
    from groute.cli import main
    env = {"GROUTE_TIMEOUT": "abc", "GROUTE_TRAVERSAL_BLOCK": "128"}
    assert setting("GROUTE_TRAVERSAL_BLOCK", env) == 128
    assert TraversalTuning.from_environment(env).block == 128
    with pytest.raises(ValueError, match="environment variable GROUTE_TIMEOUT='abc'"):
        setting("GROUTE_TIMEOUT", env)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GROUTE_TIMEOUT", "abc")
        assert main(["bfs", "--graph", "grid:5", "--backend", "cpu", "--devices", "1",
                     "--timeout", "5", "--repeat", "1"]) == 0
        assert main(["data", "list"]) == 0


def test_tunings_are_frozen_and_checked():
    t = PageRankTuning()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.sweeps = 3
    for bad, match in [({"task_arcs": 100}, "task_arcs"), ({"vertices_per_lane": 3}, "1, 2 or 4"),
                       ({"bsp_kernel": "csr"}, "bsp_kernel"), ({"check_every": 0}, "check_every"),
                       ({"persistent": "yes"}, "persistent"),
                       ({"push_rule": "hubs"}, "push_rule must be one of uniform, degree; "
                                               "got 'hubs'")]:
        with pytest.raises(ValueError, match=match):
            PageRankTuning(**bad)
    with pytest.raises(ValueError, match="link must be"):
        CCTuning(link="fast")
    with pytest.raises(ValueError, match="replay must be True or False; got 'no'"):
        CCTuning(replay="no")
    with pytest.raises(ValueError, match="multiple of 32"):
        TraversalTuning(block=100)
    with pytest.raises(ValueError, match="flush_items"):
        WorklistTuning(flush_items=0)
    with pytest.raises(ValueError, match="peer_refresh must be None or a share"):
        TraversalTuning(peer_refresh=-0.5)


def test_worklist_knobs_are_tuning_not_algorithm_options():
    """BFS/SSSP take what a user means; the worklist's knobs come in WorklistTuning (routing
    included: it changes where items travel, never the answer), and the one max_rounds left is
    TraversalTuning's bound on the peer kernels' rounds."""
    import inspect
    from groute.apps.bfs import BFS
    from groute.engines.relax.solver import RelaxSolver
    options = set(inspect.signature(RelaxSolver.__init__).parameters) - {"self", "graph"}
    assert not options & {"routing", "max_rounds", "packet_size", "flush_items"}
    assert len(options) <= 12
    g = graph_from(4, [(0, 1), (1, 2), (2, 3)], directed=False)
    given = WorklistTuning(routing="ring", rounds_per_launch=2, packet_size=64, flush_items=8)
    with BFS(g, backend="cpu", devices=2, partition="contiguous", mode="async",
             worklist_tuning=given) as solver:
        assert solver.worklist_tuning is given
        res = solver.run(0)
    assert res.stats["routing"] == "ring" and res.values.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="WorklistTuning.routing"):
        BFS(g, backend="cpu", devices=1, worklist_tuning=WorklistTuning(routing="mesh"))


def test_solvers_read_the_environment_when_built_and_take_a_tuning_as_given(monkeypatch):
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    g = graph_from(4, [(0, 1), (1, 2), (2, 3)], directed=False)
    monkeypatch.setenv("GROUTE_PR_TRACE", "1")
    monkeypatch.setenv("GROUTE_PEER_MAX_ROUNDS", "5")
    with PageRank(g, backend="cpu", devices=1) as pr, BFS(g, backend="cpu", devices=1) as bfs, \
            CC(g, backend="cpu", devices=1) as cc:
        assert pr.tuning.trace and bfs.tuning.max_rounds == 5 and cc.tuning == CCTuning()
    given = PageRankTuning(sweeps=3)
    with PageRank(g, backend="cpu", devices=1, mode="async", tuning=given) as pr:
        assert pr.tuning is given and not pr.tuning.trace
        assert pr.run().stats["sweeps_per_round"] == 3


def test_a_tuning_of_the_wrong_class_is_a_type_error_naming_the_keyword():
    """A string, a number, a dict or another engine's tuning object is refused when the
    solver is built (it failed deep inside, or a traversal ignored it)."""
    import networkx as nx
    import groute
    from groute.engines import make_engine
    G = nx.path_graph(5)
    calls = [(lambda t: groute.bfs(G, 0, backend="cpu", tuning=t), "tuning", "TraversalTuning"),
             (lambda t: groute.sssp(G, 0, backend="cpu", worklist_tuning=t), "worklist_tuning",
              "WorklistTuning"),
             (lambda t: groute.pagerank(G, backend="cpu", tuning=t), "tuning", "PageRankTuning"),
             (lambda t: groute.connected_components(G, backend="cpu", tuning=t), "tuning",
              "CCTuning"),
             (lambda t: make_engine(G, "bsp", backend="cpu", devices=1, tuning=t), "tuning",
              "BSPTuning")]
    for call, keyword, cls in calls:
        for wrong in ("x", 3, {"max_rounds": 2}, WorklistTuning() if cls != "WorklistTuning"
                      else TraversalTuning()):
            with pytest.raises(TypeError, match=f"^{keyword} must be a groute.tuning.{cls}, got "
                                                f"{type(wrong).__name__}$"):
                call(wrong)
    assert groute.bfs(G, 0, backend="cpu", tuning=TraversalTuning()).to_dict()[4] == 4


def test_the_docs_table_lists_every_variable():
    """docs/ARCHITECTURE.md's table of variables is VARIABLES: names, fields, in order."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rows = re.findall(r"^\| `(GROUTE_\w+)` \| [^|]* \| ([^|]*) \|", text, re.M)
    assert rows == [(v.name, f"`{v.tuning}`" if v.tuning else "read where used")
                    for v in VARIABLES]


def test_nothing_else_reads_groute_variables_from_the_environment():
    """groute.tuning is the one reader: no other library module looks a GROUTE_ name up in
    os.environ (the benchmark scripts may set them for the solvers they build)."""
    pattern = re.compile(r"(environ(\.get)?\s*[\[(]|getenv\()\s*f?[\"']GROUTE_")
    found = []
    for folder in ("groute", "apps", "topology"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "tuning.py" and path.parent.name == "groute":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
