"""PBF end to end: 1-4 devices, both backends, against NumPy; first-available vs static."""
import numpy as np
import pytest

from groute.apps.pbf import parse_predicate, pbf
from groute import Context
from groute.cli import main
from support import backends, skip_if_missing


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("predicate", ["even", "mod:7:3", "gt:1000"])
def test_pbf_matches_numpy(backend, k, predicate):
    skip_if_missing(backend, k)
    rng = np.random.default_rng(k)
    data = rng.integers(-5000, 5000, 10_007, dtype=np.int32)
    with Context(k, backend=backend, timeout=10) as ctx:
        for static in (False, True):
            res = pbf(data, predicate, ctx=ctx, segment_size=1000, static=static)
            expected = data[parse_predicate(predicate).numpy(data)]
            np.testing.assert_array_equal(np.sort(res.values), np.sort(expected))
            assert sum(res.stats["elements_per_device"]) == data.size


@pytest.mark.timeout(60)
def test_pbf_edge_sizes():
    with Context(2, backend="cpu", timeout=10) as ctx:
        assert pbf(np.empty(0, np.int32), "even", ctx=ctx).values.size == 0
        assert pbf(np.array([2], np.int32), "even", ctx=ctx).values.tolist() == [2]
        assert pbf(np.array([1, 3], np.int32), "even", ctx=ctx).values.size == 0


@pytest.mark.timeout(60)
def test_first_available_balances_an_artificially_slow_device():
    data = np.arange(40_000, dtype=np.int32)
    with Context(3, backend="cpu", timeout=10, cpu_delays=[0, 0, 0.05]) as ctx:
        res = pbf(data, "odd", ctx=ctx, segment_size=1000, num_buffers=1)
        per = res.stats["elements_per_device"]
        assert per[2] < per[0] and per[2] < per[1], per
        static = pbf(data, "odd", ctx=ctx, segment_size=1000, num_buffers=1, static=True)
        assert static.stats["elements_per_device"][2] >= per[2]
        assert res.time_s < static.time_s


@pytest.mark.parametrize("bad", ["prime", "mod:0:0", "mod:3:5", "gt:x", "gt:99999999999"])
def test_bad_predicates(bad):
    with pytest.raises(ValueError, match="predicate"):
        parse_predicate(bad)


@pytest.mark.parametrize("bad, match", [
    ("gt:1e300", "'gt:1e300': T is a whole number in digits, got '1e300'"),
    ("lt:2.5", "'lt:2.5': T is a whole number in digits, got '2.5'"),
    ("mod:x:1", "'mod:x:1': M is a whole number in digits, got 'x'"),
    ("mod:3:-1", "'mod:3:-1': need M >= 1 and 0 <= R < M")])
def test_a_predicate_of_a_known_kind_names_its_bad_field(bad, match):
    """gt:1e300 was called an unknown predicate, as if gt were none."""
    with pytest.raises(ValueError, match=match):
        parse_predicate(bad)


def test_bad_input_array():
    with pytest.raises(ValueError, match="int32"):
        pbf(np.zeros(4, np.float32), "even", backend="cpu", devices=1)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"segment_size": 2.5}, ValueError, r"segment_size must be an int >= 1, got 2.5 \(float\)"),
    ({"segment_size": 2.0}, ValueError, r"segment_size must be an int >= 1, got 2.0 \(float\)"),
    ({"segment_size": "3"}, ValueError, r"segment_size must be an int >= 1, got '3' \(str\)"),
    ({"segment_size": None}, ValueError, "segment_size must be an int >= 1"),
    ({"segment_size": 0}, ValueError, "segment_size must be an int >= 1, got 0$"),
    ({"predicate": None}, TypeError, "predicate is a str"),
    ({"predicate": 3}, TypeError, "predicate is a str")])
def test_bad_arguments_are_named(kwargs, error, match):
    """A segment size that is not a whole number is refused, not truncated (2.5 ran with 2),
    and a predicate that is no text is named (it failed inside str.strip)."""
    args = {"predicate": "even", **kwargs}
    with pytest.raises(error, match=match):
        pbf(np.arange(10, dtype=np.int32), args.pop("predicate"), backend="cpu", devices=2,
            **args)


def test_cli_pbf_verifies(capsys):
    assert main(["pbf", "--backend", "cpu", "--devices", "2", "--size", "20000", "--segment", "3000", "--compare"]) == 0
    out = capsys.readouterr().out
    assert out.count("verified against NumPy") == 2


def test_cli_bad_option_is_one_line_error(capsys):
    assert main(["pbf", "--backend", "cpu", "--predicate", "nope"]) == 1
    err = capsys.readouterr().err
    assert "unknown predicate" in err and "Traceback" not in err


def test_cli_info(capsys):
    assert main(["info", "--backend", "cpu", "--devices", "2"]) == 0
    out = capsys.readouterr().out
    assert "cpu:1" in out and "peer access" in out
    assert main(["info", "--backend", "cpu", "--devices", "2", "--json"]) == 0
    import json
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "cpu" and len(info["devices"]) == 2


def test_cli_pbf_scaling_run_verifies_every_count(capsys):
    assert main(["pbf", "--backend", "cpu", "--size", "30000", "--segment", "2000", "--scale", "1,2,3"]) == 0
    out = capsys.readouterr().out
    assert out.count("verified against NumPy") == 3
    assert "1 x cpu: 1.00x the speed of 1" in out and "3 x cpu:" in out and "cpu:2" in out


def test_cli_pbf_scaling_runs_the_policies_asked_for(capsys):
    """--scale ran first-available whatever --static or --compare said."""
    argv = ["pbf", "--backend", "cpu", "--size", "6000", "--segment", "1000", "--scale", "1,2"]
    assert main([*argv, "--static"]) == 0
    out = capsys.readouterr().out
    assert out.count("static:") == 2 and "first_available" not in out
    assert main([*argv, "--compare"]) == 0
    out = capsys.readouterr().out
    assert out.count("static:") == 2 and out.count("first_available:") == 2
    assert out.count("verified against NumPy") == 4


@pytest.mark.timeout(60)
def test_devices_write_their_kept_elements_straight_into_the_output():
    """Each device reserves its range of the output and copies into it: the ranges tile the
    output exactly (no gaps, no overlap) whatever order the devices finish in."""
    data = np.arange(50_000, dtype=np.int32)
    with Context(4, backend="cpu", timeout=10, cpu_delays=[0, 0.002, 0, 0.001]) as ctx:
        res = pbf(data, "mod:3:0", ctx=ctx, segment_size=700)
        np.testing.assert_array_equal(np.sort(res.values), data[data % 3 == 0])
        assert res.stats["kept"] == res.values.size == (data % 3 == 0).sum()
