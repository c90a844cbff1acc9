"""Same programs, same answers across processes: BFS, SSSP, PageRank, CC and k-core (the
operator API's BSP engine; of a directed graph too) on a distributed context of 2 and 3 ranks
equal the one-process answers; the commands under mpiexec and groute launch verify on rank 0 and write per rank; a
rank whose part cannot be read stops the job, rank 0 naming it."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from mpi_support import ROOT, needs_mpi, program, rank_environment, run_ranks

pytestmark = needs_mpi
APPS = ("bfs", "sssp", "pagerank", "pagerank-kernel", "pagerank-dangling", "pagerank-bins",
        "pagerank-csc", "pagerank-nstart", "pagerank-nstart-bins", "cc", "kcore", "bfs-parents",
        "sssp-parents", "pagerank-weighted-csc", "pagerank-weighted-bins")


@pytest.mark.parametrize("n, graphs", [(1, ["kron:8", "rmat:7"]), (2, ["kron:8", "grid:9"]),
                                      (3, ["rmat:7", "er:200:4"])])
def test_every_app_answers_as_one_process(n, graphs):
    """Also a job of one rank (``mpiexec -n 1``): its graph is one part holding every row."""
    done = run_ranks(n, [program("app_checks.py"), "--backend", "cpu", *graphs], timeout=240)
    assert done.returncode == 0, done.stderr
    assert "DIFFERENT" not in done.stdout, done.stdout
    for spec in graphs:
        for app in APPS:
            seen = len(re.findall(rf"rank \d {app} {re.escape(spec)}: same", done.stdout))
            assert seen == n, (app, spec, done.stdout)      # rmat: k-core of a directed graph


@pytest.mark.parametrize("n", [2, 3])
def test_cc_across_ranks_merges_changes_or_whole_arrays_alike(n):
    """CC's messages between ranks are each rank's changes, read whole only where its pairs
    overflow: with a list of n pairs nothing is read whole, with a list of one pair every
    message of er:400:1's many small components is (n - 1 gathered twice, rank 0's to the
    n - 1 others twice: the snapshot and the answer), and the answers are one process's
    either way, also from a solver made under another share."""
    graphs = ["er:400:1", "kron:8", "grid:9"]
    for share, whole in ((1, 0), (10**9, 4 * (n - 1))):
        done = run_ranks(n, [program("cc_checks.py"), "cpu", str(share), *graphs], timeout=120)
        assert done.returncode == 0, done.stderr
        rows = re.findall(r"rank (\d) (\S+): (\w+) whole (\d+) bytes (\d+) rounds (\d+) "
                          r"routed True", done.stdout)
        assert len(rows) == n * len(graphs), done.stdout
        assert all(same == "same" and rounds == "2" and int(b) > 0
                   for _, _, same, _, b, rounds in rows), done.stdout
        assert [int(w) for _, spec, _, w, _, _ in rows if spec == "er:400:1"] == [whole] * n
        assert done.stdout.count("made before: same") == n * len(graphs), done.stdout
        assert done.stdout.count("peer refused: exchange='peer' reads the other ranks' memory, "
                                 "but it needs CUDA devices") == n, done.stdout


@pytest.mark.parametrize("app", ["bfs", "sssp", "pr", "cc", "kcore", "katz", "scc",
                                 "betweenness"])
def test_the_commands_verify_on_rank_zero(app):
    # SCC takes a directed graph; betweenness runs a round per source: a smaller grid
    graph = {"scc": "rmat:7", "betweenness": "grid:5"}.get(app, "grid:8")
    done = run_ranks(2, ["-m", "groute", app, "--graph", graph, "--verify", "--repeat", "1",
                         "--backend", "cpu"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("verify:") == 1, done.stdout           # rank 0 prints
    assert "2 cpu devices" in done.stdout and "FAILED" not in done.stdout


def test_stats_print_every_ranks_memory_while_loading():
    """--stats across processes: rank 0 prints every rank's traced loading peak and resident
    peak against the whole graph's CSR (sssp: the weighted graph keeps the figures); --json
    --stats carries them."""
    done = run_ranks(3, ["-m", "groute", "sssp", "--graph", "kron:10", "--stats", "--repeat",
                         "1"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("loading memory per rank") == 1, done.stdout
    ranks = re.findall(r"rank (\d): traced [\d.]+ MiB \(([\d.]+)x the CSR\), resident [\d.]+ "
                       r"MiB; holds [\d,]+ vertices", done.stdout)
    assert [r for r, _ in ranks] == ["0", "1", "2"], done.stdout
    largest = float(re.search(r"largest rank: traced ([\d.]+)x the CSR", done.stdout)[1])
    assert largest == max(float(x) for _, x in ranks) > 0
    done = run_ranks(2, ["-m", "groute", "bfs", "--graph", "grid:20", "--stats", "--json",
                         "--repeat", "1"], timeout=120)
    assert done.returncode == 0, done.stderr
    memory = json.loads(done.stdout)["load_memory"]
    assert len(memory["ranks"]) == 2 and memory["csr_bytes"] > 0
    assert sum(r["arcs"] for r in memory["ranks"]) == json.loads(done.stdout)["arcs"]
    assert all(r["traced_bytes"] > 0 and r["max_rss_bytes"] > 0 for r in memory["ranks"])


def test_pageranks_stats_name_the_split_the_ranks_ran():
    """The ranks split a graph by their ranges whatever --partition asks (its default: metis),
    and the stats say the split that ran."""
    done = run_ranks(2, ["-m", "groute", "pr", "--graph", "grid:6", "--json", "--repeat", "1",
                         "--backend", "cpu"], timeout=60)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)["stats"]
    assert (stats["partition"], stats["layout"]) == ("contiguous", "ranges"), stats


def test_every_rank_writes_its_own_vertices(tmp_path):
    out = tmp_path / "depth.npz"
    done = run_ranks(3, ["-m", "groute", "bfs", "--graph", "kron:8", "--source", "5",
                         "--repeat", "1", "--output", out, "--backend", "cpu"], timeout=120)
    assert done.returncode == 0, done.stderr
    parts = [np.load(tmp_path / f"depth.part-{r}-of-3.npz") for r in range(3)]
    ids = np.concatenate([p["ids"] for p in parts])
    assert np.array_equal(ids, np.arange(256))
    import groute
    want = groute.bfs("kron:8", 5, backend="cpu", devices=1).values
    assert np.array_equal(np.concatenate([p["values"] for p in parts]), want)


def test_groute_launch_runs_a_command():
    done = subprocess.run([sys.executable, "-m", "groute", "launch", "-n", "2", "--", "cc",
                           "--graph", "grid:6", "--verify", "--repeat", "1", "--backend", "cpu"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=rank_environment())
    assert done.returncode == 0, done.stderr
    assert "verify: OK" in done.stdout


def test_a_rank_that_cannot_read_its_part_stops_the_job(tmp_path):
    folder = tmp_path / "parts"
    written = subprocess.run([sys.executable, "-m", "groute", "partition", "--graph", "grid:9",
                              "--parts", "3", "--out", str(folder)], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    (folder / "part-1-of-3.npz").write_bytes(b"not a part")
    done = run_ranks(3, ["-m", "groute", "bfs", "--graph", folder, "--repeat", "1",
                         "--timeout", "20", "--backend", "cpu"], timeout=120)
    assert done.returncode != 0
    assert re.search(r"\[rank 1\] groute bfs: error: .*part-1-of-3\.npz", done.stderr), \
        done.stderr
    # rank 0, which read its part and went on to wait for rank 1, reports rank 1's error
    assert re.search(r"\[rank 0\] groute bfs: error: cpu:1 \(rank 1\): .*ValueError: "
                     r".*part-1-of-3\.npz", done.stderr), done.stderr


def test_options_that_need_the_whole_file_are_refused():
    done = run_ranks(2, ["-m", "groute", "bfs", "--graph", "kron:6", "--symmetric",
                         "--backend", "cpu"], timeout=60)
    assert done.returncode != 0
    assert "write a part set from it once" in done.stderr


def test_kcore_refuses_a_self_loop_that_one_rank_holds_on_every_rank(tmp_path):
    """The loop is in rank 1's part: every rank counts the loops of every rank's arcs and
    refuses the graph alike, naming the loop's vertex (not rank 1 alone, the others going on)."""
    from groute.graph import CSRGraph
    from groute.graph.part_set import write_part_set
    src, dst = np.array([0, 1, 2, 3, 5, 6, 7]), np.array([1, 2, 3, 4, 6, 7, 7])
    write_part_set(CSRGraph.from_edges(src, dst, 8, directed=True, name="looped"), 2,
                   tmp_path / "looped")
    done = run_ranks(2, ["-m", "groute", "kcore", "--graph", tmp_path / "looped", "--repeat",
                         "1", "--backend", "cpu", "--timeout", "20"], timeout=60)
    assert done.returncode != 0       # rank 0 reports (and ends the job) on its own count
    assert re.search(r"\[rank 0\] groute kcore: error: graph looped has 1 self-loop\(s\) "
                     r"\(the first at vertex 7\)", done.stderr), done.stderr


@pytest.mark.parametrize("weights", ["5", "5.5"])
def test_sssp_across_ranks_where_one_rank_holds_no_arcs(tmp_path, weights):
    """Rank 1's part has no arcs: its largest weight, for the overflow check, goes to the
    allreduce as the same type as the others' (mismatched, MPICH aborted the job)."""
    from groute.graph import CSRGraph
    from groute.graph.part_set import write_part_set
    w = np.array([float(weights)], np.float32 if "." in weights else np.int32)
    write_part_set(CSRGraph.from_edges(np.array([0]), np.array([1]), 4, w, directed=True,
                                       name="one_arc"), 2, tmp_path / "one_arc")
    done = run_ranks(2, ["-m", "groute", "sssp", "--graph", tmp_path / "one_arc", "--verify",
                         "--repeat", "1", "--backend", "cpu", "--timeout", "20"], timeout=60)
    assert done.returncode == 0, done.stderr
    assert "verify: ok" in done.stdout.lower(), done.stdout


@pytest.mark.parametrize("option", ["--output", "--predecessors"])
def test_standard_output_across_processes_is_refused_before_the_run(option):
    done = run_ranks(2, ["-m", "groute", "bfs", "--graph", "grid:5", option, "-", "--repeat",
                         "1", "--backend", "cpu"], timeout=60)
    assert done.returncode != 0
    assert f"groute bfs: error: {option} -: across processes every rank writes" in done.stderr
    assert "bfs grid:5 from" not in done.stdout + done.stderr      # nothing ran


def test_a_device_count_other_than_the_processes_is_refused():
    done = run_ranks(2, ["-m", "groute", "bfs", "--graph", "grid:5", "--devices", "3",
                         "--repeat", "1", "--backend", "cpu"], timeout=60)
    assert done.returncode != 0
    assert "error: --devices 3: run as 2 processes, the command has one device per process" \
        in done.stderr, done.stderr


def test_a_rank_whose_output_file_cannot_be_written_stops_the_job_before_it_runs(tmp_path):
    """Each rank checks its own ``--output`` file (``depth.part-1-of-3.npz``), not only the
    name given: a folder where rank 1 would write stops the job with rank 1 named, and no rank
    wrote a part."""
    (tmp_path / "depth.part-1-of-3.npz").mkdir()
    done = run_ranks(3, ["-m", "groute", "bfs", "--graph", "kron:8", "--repeat", "1",
                         "--output", tmp_path / "depth.npz", "--timeout", "20",
                         "--backend", "cpu"], timeout=120)
    assert done.returncode != 0
    assert re.search(r"\[rank 1\] groute bfs: error: --output \S*depth\.part-1-of-3\.npz: a "
                     r"directory, not a file", done.stderr), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["depth.part-1-of-3.npz"]
