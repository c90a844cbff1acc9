"""No silent slow path: a call the NetworkX backend implements but declines (its ``can_run``
rule, the conversion, or the function raising NotImplementedError) logs why at INFO, and with
``nx.config.backends.groute.fallback_to_nx`` False raises NotRunOnGroute naming the function
and the reason instead of running on NetworkX (groute.nx_backend.refusal)."""
from __future__ import annotations

import logging

import networkx as nx
import pytest

from groute.errors import GrouteError, NotRunOnGroute
from nx_support import registered  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def weighted_path(value):
    G = nx.path_graph(5)
    nx.set_edge_attributes(G, 1, "w")
    G[1][2]["w"] = value
    return G


#: each place that declines a call: (call, a fragment of its reason)
REFUSALS = {
    "rule": (lambda **kw: nx.pagerank(nx.cycle_graph(4), nstart={0: 1.0}, **kw), "nstart"),
    "function": (lambda **kw: nx.single_source_dijkstra_path_length(
        weighted_path(0.5), 0, weight="w", **kw), "real weights"),
    "conversion": (lambda **kw: nx.single_source_dijkstra_path_length(
        weighted_path("heavy"), 0, weight="w", **kw), "cannot convert"),
}
FUNCTION = {"rule": "pagerank", "function": "single_source_dijkstra_path_length",
            "conversion": "single_source_dijkstra_path_length"}
#: the two ways a call reaches the backend
DISPATCH = {"keyword": {"backend": "groute"}, "priority": {}}


@pytest.fixture(params=list(DISPATCH))
def dispatch(request):
    """The call's keywords: ``backend="groute"``, or none with groute first in
    ``nx.config.backend_priority``."""
    with nx.config.backend_priority(algos=["groute"]):
        yield DISPATCH[request.param]


@pytest.mark.parametrize("where", list(REFUSALS))
def test_refusal_raises_naming_function_and_reason_without_fallback(where, dispatch):
    call, why = REFUSALS[where]
    with nx.config.backends.groute(fallback_to_nx=False):
        with pytest.raises(NotRunOnGroute) as err:
            call(**dispatch)
    assert err.value.function == FUNCTION[where]
    assert why in err.value.reason
    assert f"{FUNCTION[where]}()" in str(err.value) and "fallback_to_nx" in str(err.value)
    assert isinstance(err.value, (GrouteError, RuntimeError))
    assert not isinstance(err.value, NotImplementedError)     # NetworkX would run the call
    if where != "rule":
        assert isinstance(err.value.__cause__, NotImplementedError)


@pytest.mark.parametrize("where", list(REFUSALS))
def test_refusal_logged_at_info_and_networkx_runs_the_call(where, caplog):
    call, why = REFUSALS[where]
    caplog.set_level(logging.INFO, logger="groute")
    with nx.config.backend_priority(algos=["groute"]):
        got = outcome(call)
    assert got == outcome(call, backend="networkx")
    [record] = [r for r in caplog.records if r.name.startswith("groute.nx_backend")]
    assert record.levelno == logging.INFO
    assert f"{FUNCTION[where]}()" in record.getMessage() and why in record.getMessage()


def outcome(call, **kwargs):
    """The call's answer, or the type of the exception it raised (NetworkX's TypeError for a
    weight that is not a number)."""
    try:
        return call(**kwargs)
    except Exception as exc:
        return type(exc)


def test_refused_keyword_call_still_raises_networkx_error_with_fallback(caplog):
    """``backend="groute"`` never falls back (NetworkX's rule): NotImplementedError, and the
    reason logged at INFO."""
    caplog.set_level(logging.INFO, logger="groute")
    call, why = REFUSALS["rule"]
    with pytest.raises(NotImplementedError):
        call(backend="groute")
    assert any(why in r.getMessage() for r in caplog.records)


def test_a_call_groute_runs_logs_no_refusal(caplog):
    caplog.set_level(logging.INFO, logger="groute")
    with nx.config.backends.groute(fallback_to_nx=False, backend="cpu", devices=1):
        got = nx.single_source_shortest_path_length(nx.path_graph(4), 0, backend="groute")
    assert got == {0: 0, 1: 1, 2: 2, 3: 3}
    assert not [r for r in caplog.records if r.name.startswith("groute.nx_backend")]


@pytest.mark.parametrize("value", [0, "no", None])
def test_fallback_to_nx_bad_values_are_named(value):
    with nx.config.backends.groute(fallback_to_nx=value):
        with pytest.raises(ValueError, match="nx.config.backends.groute.fallback_to_nx"):
            nx.single_source_shortest_path_length(nx.path_graph(3), 0, backend="groute")


def test_not_run_on_groute_survives_pickling():
    import pickle
    err = pickle.loads(pickle.dumps(NotRunOnGroute("pagerank", "nstart")))
    assert (err.function, err.reason) == ("pagerank", "nstart")


@pytest.mark.parametrize("name, value", [("personalization", -1), ("dangling", float("inf")),
                                         ("personalization", "x")])
def test_pagerank_weights_groute_cannot_take_are_left_to_networkx(name, value):
    """NetworkX takes a personalization or dangling weight as it is, where groute's PageRank
    takes finite weights >= 0: the backend declines the call (it raised instead)."""
    G = nx.path_graph(5)
    kwargs = {name: {0: value, 1: 2, "not a node": -5}}
    with nx.config.backend_priority(algos=["groute"]):
        assert outcome(nx.pagerank, G=G, **kwargs) == outcome(nx.pagerank, G=G,
                                                              backend="networkx", **kwargs)
        with nx.config.backends.groute(fallback_to_nx=False):
            with pytest.raises(NotRunOnGroute, match=f"{name} with weights that are negative"):
                nx.pagerank(G, **kwargs)
    kept = {name: {0: 1, 1: 2, "not a node": -5}}      # keys that are not nodes are not read
    with nx.config.backends.groute(fallback_to_nx=False, backend="cpu", devices=1):
        assert nx.pagerank(G, backend="groute", **kept) == pytest.approx(
            nx.pagerank(G, backend="networkx", **kept), rel=1e-4)
