"""The app commands (``groute bfs/sssp/pr/cc``): one summary line, ``--stats``, ``--json``,
GTEPS from the arcs a run traversed, ``--source`` and every output file in the graph's own ids,
output formats by suffix, ``--symmetric``, ``--columns``, and SSSP's weights rule."""
import csv
import json

import numpy as np
import pytest

from groute.apps.sssp import sssp
from groute.cli import main
from groute.graph import load_graph, reference, shipped_graph_path

POWER = str(shipped_graph_path())            # Matrix Market: ids 1..4941
RUN = ["--backend", "cpu", "--devices", "2", "--repeat", "1"]


def run_json(capsys, *argv):
    assert main([*argv, *RUN, "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    return json.loads(out[0])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv", [["bfs", "--graph", "grid:6"], ["sssp", "--graph", "grid:6"],
                                  ["pr", "--graph", "grid:6"], ["cc", "--graph", "grid:6"]],
                         ids=["bfs", "sssp", "pr", "cc"])
def test_one_summary_line_and_counters_on_request(argv, capsys):
    assert main([*argv, *RUN]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "ms (median of 1; 2 cpu devices" in lines[0], lines
    assert main([*argv, *RUN, "--stats"]) == 0
    text = capsys.readouterr().out
    assert "graph grid:6: 36 vertices" in text and "time: median" in text and "mode" in text
    record = run_json(capsys, *argv)
    assert record["app"] == argv[0] and record["vertices"] == 36 and record["devices"] == 2
    assert record["time_s"] > 0 and isinstance(record["stats"], dict)


@pytest.mark.timeout(60)
def test_gteps_counts_the_arcs_traversed_not_all_arcs(capsys):
    g = load_graph("kron:8")
    isolated = int(np.flatnonzero(np.diff(g.indptr) == 0)[0])
    lone = run_json(capsys, "bfs", "--graph", "kron:8", "--source", str(isolated))
    assert lone["reached"] == 1 and lone["arcs_traversed"] == 0 and lone["gteps"] == 0
    busy = run_json(capsys, "bfs", "--graph", "kron:8")      # default: the most out-arcs
    reached = reference.bfs(g, busy["source"]) >= 0
    assert busy["reached"] == int(reached.sum()) > 1
    assert busy["arcs_traversed"] == int(np.diff(g.indptr)[reached].sum())
    assert busy["gteps"] == pytest.approx(busy["arcs_traversed"] / busy["time_s"] / 1e9)


@pytest.mark.timeout(60)
def test_verify_in_json_and_exit_status(capsys):
    record = run_json(capsys, "bfs", "--graph", POWER, "--source", "1", "--verify")
    assert record["verify"]["ok"] is True and record["source"] == 1


@pytest.mark.timeout(60)
def test_outputs_by_suffix_carry_the_files_ids(tmp_path, capsys):
    g = load_graph(POWER)
    want = reference.bfs(g, 9)                                 # file id 10 = position 9
    ids = np.arange(1, g.num_vertices + 1)
    paths = {s: tmp_path / f"d{s}" for s in (".npy", ".npz", ".csv", ".json", ".txt")}
    for path in paths.values():
        assert main(["bfs", "--graph", POWER, "--source", "10", *RUN, "--output", str(path)]) == 0
    npy = np.load(paths[".npy"])
    assert npy.dtype.names == ("id", "depth")
    np.testing.assert_array_equal(npy["id"], ids)
    np.testing.assert_array_equal(npy["depth"], want)
    npz = np.load(paths[".npz"])
    np.testing.assert_array_equal(npz["ids"], ids)
    np.testing.assert_array_equal(npz["values"], want)
    rows = list(csv.reader(paths[".csv"].open()))
    assert rows[0] == ["id", "depth"] and rows[10] == ["10", "0"] and len(rows) == g.num_vertices + 1
    assert paths[".json"].read_text().endswith("}\n")
    js = json.loads(paths[".json"].read_text())
    assert js["ids"] == ids.tolist() and js["values"] == want.tolist()
    txt = np.loadtxt(paths[".txt"], dtype=np.int64)
    np.testing.assert_array_equal(txt, np.column_stack([ids, want]))


@pytest.mark.timeout(60)
def test_outputs_of_a_labelled_graph_and_cc_labels_as_ids(tmp_path, capsys):
    """SNAP ids are sparse; CC's labels are written as the representative's id."""
    path = tmp_path / "g.txt"
    path.write_text("# two components\n100 7\n7 55\n9 3\n")
    g = load_graph(path, cache=False)
    out = tmp_path / "cc.csv"
    assert main(["cc", "--graph", str(path), *RUN, "--output", str(out)]) == 0
    rows = {int(a): int(b) for a, b in list(csv.reader(out.open()))[1:]}
    assert set(rows) == set(g.ids.tolist())
    assert rows[100] == rows[7] == rows[55] and rows[9] == rows[3] and rows[9] != rows[7]
    assert rows[rows[100]] == rows[100] and rows[100] in (7, 55, 100)
    dist = tmp_path / "d.json"
    assert main(["sssp", "--graph", str(path), "--source", "100", *RUN, "--output", str(dist)]) == 0
    js = json.loads(dist.read_text())
    got = dict(zip(js["ids"], js["values"]))
    assert got[100] == 0 and got[55] == 2 and got[9] is None        # unreachable: null in JSON


@pytest.mark.timeout(60)
def test_source_errors_are_one_line_and_name_the_id(capsys):
    assert main(["bfs", "--graph", POWER, *RUN, "--source", "0"]) == 1
    err = capsys.readouterr().err
    assert "--source 0 is not a vertex of power" in err and "1..4941" in err
    assert main(["bfs", "--graph", POWER, *RUN, "--source", "x"]) == 1
    assert "integers" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_sssp_weights_rule_is_the_apis(capsys, tmp_path):
    """An unweighted graph: unit weights on the command line as in the library (distances are
    hop counts); random weights only with --random-weights."""
    assert load_graph(POWER).weights is None
    out = tmp_path / "unit.npy"
    record = run_json(capsys, "sssp", "--graph", POWER, "--source", "1", "--output", str(out))
    assert record["weights"] == "1 on every arc"
    api = sssp(POWER, 1, backend="cpu", devices=1)
    np.testing.assert_array_equal(np.load(out)["distance"], api.values)
    np.testing.assert_array_equal(api.values, reference.bfs(load_graph(POWER), 0).astype(float))
    rand = tmp_path / "random.npy"
    record = run_json(capsys, "sssp", "--graph", POWER, "--source", "1", "--random-weights",
                      "--seed", "3", "--output", str(rand))
    assert record["weights"].startswith("random integers 1..64")
    weighted = load_graph(POWER).with_weights(seed=3)
    np.testing.assert_array_equal(np.load(rand)["distance"], reference.sssp(weighted, 0))


@pytest.mark.timeout(60)
def test_symmetric_reads_a_directed_input_both_ways(tmp_path, capsys):
    path = tmp_path / "chain.txt"
    path.write_text("0 1\n1 2\n")
    directed = run_json(capsys, "bfs", "--graph", str(path), "--source", "2")
    assert directed["directed"] is True and directed["reached"] == 1
    both = run_json(capsys, "bfs", "--graph", str(path), "--source", "2", "--symmetric")
    assert both["directed"] is False and both["reached"] == 3


@pytest.mark.timeout(60)
def test_columns_choose_the_csv_columns_by_name_or_position(tmp_path, capsys):
    """--columns names the source, target and weight columns of a CSV file, by header name or
    0-based position; the weights read are the chosen column's."""
    path = tmp_path / "trips.csv"
    path.write_text("cost,from,to\n5,1,2\n1,2,3\n9,1,3\n")
    by_name = run_json(capsys, "sssp", "--graph", str(path), "--source", "1", "--no-cache",
                       "--columns", "from,to,cost", "--output", str(tmp_path / "d.json"))
    assert by_name["reached"] == 3
    assert json.loads((tmp_path / "d.json").read_text())["values"] == [0.0, 5.0, 6.0]
    by_position = run_json(capsys, "sssp", "--graph", str(path), "--source", "1", "--no-cache",
                           "--columns", "1,2,0", "--output", str(tmp_path / "p.json"))
    assert by_position["reached"] == 3
    assert json.loads((tmp_path / "p.json").read_text())["values"] == [0.0, 5.0, 6.0]
    assert main(["sssp", "--graph", str(path), *RUN, "--columns", "from"]) == 1


@pytest.mark.parametrize("app", ["bfs", "sssp"])
def test_no_cache_keeps_metis_splits_out_of_the_cache_directory(app, tmp_path, monkeypatch):
    """``--no-cache`` on an app command: neither the parsed graph nor its METIS split is
    written to the user cache directory (the split was, though the graph was not)."""
    from groute.cli import main
    from groute.graph.cache import cache_root
    cache = tmp_path / "cache"
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(cache))
    graph = tmp_path / "ring.txt"
    graph.write_text("".join(f"{i} {(i + 1) % 32}\n" for i in range(32)))
    words = [app, "--graph", str(graph), "--backend", "cpu", "--devices", "2",
             "--partition", "metis", "--repeat", "1"]
    assert main(words + ["--no-cache"]) == 0
    assert [p for p in cache.rglob("*") if p.is_file()] == []
    assert cache_root() == cache
    assert main(words) == 0                # without it, both are cached
    assert {p.relative_to(cache).parts[0] for p in cache.rglob("*") if p.is_file()} \
        >= {"graphs", "partitions"}


@pytest.mark.timeout(60)
def test_logical_devices_are_named_in_the_summary_and_the_json(capsys, monkeypatch):
    """Times taken on logical devices (several on one GPU) are a correctness check, not a
    measurement: the summary line and ``--json`` say the devices are logical and how many GPUs
    they share. Stand-in: CPU virtual devices marked as logical devices on GPU 0."""
    import groute.solver
    from groute.runtime.context import Context
    marked = []

    def on_one_gpu(ctx=None, *, devices=None, backend="auto", timeout=None):
        ctx = Context(devices, backend=backend, timeout=timeout)     # not a kept one
        for d in ctx.devices:
            d.logical, d.gpu = True, 0
        marked.append(ctx)
        return ctx, ctx.shutdown
    monkeypatch.setattr(groute.solver, "lease", on_one_gpu)
    assert main(["bfs", "--graph", "grid:6", *RUN]) == 0
    line = capsys.readouterr().out.strip()
    assert ("ms (median of 1; 2 cpu devices (logical, sharing 1 GPU: for testing, not timing), "
            in line), line
    record = run_json(capsys, "cc", "--graph", "grid:6")
    assert record["logical"] is True and record["logical_gpus"] == 1
    monkeypatch.undo()
    assert marked
    record = run_json(capsys, "cc", "--graph", "grid:6")
    assert record["logical"] is False and "logical_gpus" not in record
