"""What a functor's NumPy callable returns is checked once per operator call
(groute.operators.returns): a wrong position, mask or message is a DeviceError naming the
device, the functor and the bad value, in a single call and inside run_loop (the Python loop and
the async engine's), never a different answer or a bare IndexError later."""
from __future__ import annotations

import numpy as np
import pytest

from groute import Context, DeviceError
from groute.engines import make_engine
from groute.graph import CSRGraph
from groute.operators import (AdvanceStep, FilterStep, Functor, Gather, Message, advance, filter,
                              run_loop)

pytestmark = pytest.mark.timeout(120)

N = 80


def path_graph():
    """0 - 1 - ... - 79, on two devices 40 vertices each (contiguous)."""
    src = np.arange(N - 1)
    return CSRGraph.from_edges(np.r_[src, src + 1], np.r_[src + 1, src], N, directed=False)


def accepting(name, body, **kwargs):
    return Functor(name=name, cuda="return true;", numpy=body, **kwargs)


@pytest.fixture
def engine():
    ctx = Context(2, backend="cpu", timeout=20)
    eng = make_engine(path_graph(), "async", ctx=ctx, partition="contiguous")   # 0..39 on cpu:0
    yield eng
    eng.close()
    ctx.close()


#: advance bodies whose answer NumPy would change without a word, and what the error quotes
BAD_POSITIONS = [
    ("minus_one", lambda s, v: np.array([-1]), "position -1"),
    ("wraps", lambda s, v: v + 2**32, "position 42949672"),
    ("fraction", lambda s, v: v + 0.7, "float64 positions (the first is "),
    ("far", lambda s, v: np.array([10_000]), "position 10000"),
    ("unsigned", lambda s, v: np.array([2**63], np.uint64), "position 9223372036854775808"),
    ("grid", lambda s, v: v.reshape(-1, 1), "shape"),
    ("nothing", lambda s, v: None, "returned None"),
    ("mask", lambda s, v: v > 3, "bool mask"),
    ("objects", lambda s, v: [int(v[0]), None], "object positions (the first is "),
]


@pytest.mark.parametrize("name,body,quoted", BAD_POSITIONS)
def test_an_advance_returning_what_is_not_its_vertices_is_a_device_error(engine, name, body,
                                                                          quoted):
    with pytest.raises(DeviceError) as info:
        advance(engine.frontier([0, 1, 40, 41]), accepting(name, body))
    err = str(info.value)
    assert err.startswith(("cpu:0: ", "cpu:1: ")) and f"advance({name})" in err, err
    assert quoted in err, err
    # the failure ended the call, not the engine
    out = advance(engine.frontier([0, 40]), accepting("fine", lambda s, v: v))
    assert engine.positions_of(out).tolist() == [1, 39, 41]


def test_an_empty_list_of_any_type_is_no_vertex(engine):
    out = advance(engine.all_vertices(), accepting("none", lambda s, v: []))
    assert len(out) == 0


@pytest.mark.parametrize("order", ["levels", "any"])
def test_inside_run_loop_the_same_check_names_the_functor(engine, order):
    """Inside a loop (the operator calls, or the async engine's worklists with
    order='any'): -1 failed as 'negative dimensions are not allowed', naming nothing."""
    engine.state("seen", np.int32, 0)

    def claim_then_minus_one(s, v):
        fresh = v[s["seen"][v] == 0]
        s["seen"][fresh] = 1
        return np.where(fresh == 5, -1, fresh) if fresh.size else fresh
    visit = Functor(name="claim_then_minus_one", params="int* seen", cuda="return true;",
                    numpy=claim_then_minus_one)
    where = "run_loop(async)" if order == "any" else "advance(claim_then_minus_one)"
    with pytest.raises(DeviceError) as info:
        run_loop(engine.frontier([0]), [AdvanceStep(visit)], order=order)
    assert str(info.value).startswith(f"cpu:0: {where}: claim_then_minus_one's numpy callable "
                                      f"returned position -1"), str(info.value)


@pytest.mark.parametrize("ctype,value,quoted", [
    ("int", np.nan, "nan, which no integer"),
    ("int", np.inf, "inf, which no integer"),
    ("int", 2.5, "2.5, which is not an integer"),
    ("int", 2.0**40, "1099511627776.0, beyond its range -2147483648..2147483647"),
    ("long long", np.nan, "nan, which no integer"),
    ("unsigned int", -1, "-1, beyond its range 0..4294967295"),
    ("float", 1e39, "1e+39, too large for it"),
    ("int", "x", "<U1 values; it takes numbers"),
])
def test_a_message_its_type_cannot_hold_is_a_device_error(engine, ctype, value, quoted):
    """NaN into an int message was a RuntimeWarning and some integer."""
    send = Functor(name="send", cuda="return true;", numpy=lambda s, v, m: v,
                   message=Message(ctype, numpy=lambda s, u: np.full(u.shape, value)))
    with pytest.raises(DeviceError) as info:
        advance(engine.frontier([0, 40]), send)
    err = str(info.value)
    assert err.startswith(("cpu:0: ", "cpu:1: ")), err
    assert f"advance(send): send's message ({ctype}) returned {quoted}" in err, err


@pytest.mark.parametrize("ctype,values", [
    ("int", lambda u: u.astype(np.int64) * 3),              # wider, in range
    ("int", lambda u: u.astype(np.float64)),                # whole numbers
    ("float", lambda u: u / 7.0),                           # float64, in range
    ("float", lambda u: np.full(u.shape, np.nan)),          # a float message may be NaN
    ("double", lambda u: u.astype(np.int64)),
])
def test_messages_that_fit_their_type_pass(engine, ctype, values):
    got = {}

    def keep(s, v, m):
        got.setdefault("m", []).append(np.asarray(m))
        return v
    send = Functor(name="send", cuda="return true;", numpy=keep,
                   message=Message(ctype, numpy=lambda s, u: values(u)))
    advance(engine.frontier([0, 40]), send)
    assert all(m.dtype == send.message.dtype for m in got["m"])


def test_a_filter_and_a_gathers_candidates_return_masks(engine):
    not_mask = Functor(name="not_mask", cuda="return true;", numpy=lambda s, v: v)
    with pytest.raises(DeviceError, match=r"cpu:[01]: filter\(not_mask\): not_mask's numpy "
                                          r"callable must return a bool mask"):
        filter(engine.all_vertices(), not_mask)
    gather = Functor(name="sum_in", cuda="return true;", numpy=lambda s, v, m: v,
                     message=Message("int", numpy=lambda s, u: np.ones(u.shape, np.int32)),
                     gather=Gather("sum", numpy=lambda s, v: v.astype(np.int8)))
    with pytest.raises(DeviceError, match="the gather of sum_in's numpy callable must return "
                                          "a bool mask"):
        advance(engine.frontier([0, 40]), gather)
    with pytest.raises(DeviceError, match="not_mask"):
        run_loop(engine.all_vertices(), [FilterStep(not_mask)], order="levels")
