"""Each rank loads only its part (groute.graph.ranked, groute partition's part sets): the
ranks' parts put together equal the whole graph, and each holds its share."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from groute.graph import load_graph
from groute.graph.part_set import read_manifest, read_part, read_whole, write_part_set

from mpi_support import MPIEXEC, ROOT, needs_mpi, program, rank_environment, run_ranks

GRAPHS = ["kron:8", "rmat:7", "er:400:5", "grid:11", "grid:4x9"]


def check(done, n, sources):
    assert done.returncode == 0, done.stderr
    assert "DIFFERENT" not in done.stdout, done.stdout       # (lines of several ranks may mix)
    for source in sources:     # every rank holds a part, together every arc once
        held = [int(m) for m in re.findall(rf"{re.escape(source)}: same \((\d+) of", done.stdout)]
        total = int(re.search(rf"{re.escape(source)}: same \(\d+ of (\d+)", done.stdout)[1])
        assert len(held) == n and sum(held) == total and max(held) < total


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_generated_parts_put_together_are_the_whole_graph(n):
    check(run_ranks(n, [program("loading_checks.py"), *GRAPHS], timeout=120), n, GRAPHS)


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_each_rank_loads_within_the_stated_memory_bound(n, tmp_path):
    """Every rank's traced loader peak is within docs/DISTRIBUTED.md's bound (a generated
    graph: its share of the candidate arcs at 4 bytes each, a few int64 per vertex of its
    share and range, one chunk's working arrays; a part set: its part's CSR), on graphs big
    enough that the graph's terms outweigh the rest."""
    parts = tmp_path / "kron16"
    write_part_set(load_graph("kron:16", cache=False), n, parts)
    graphs = ["kron:18", "grid:700", str(parts)]
    done = run_ranks(n, [program("load_memory_checks.py"), *graphs], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "OVER" not in done.stdout, done.stdout
    for graph in graphs:
        assert len(re.findall(rf"{re.escape(graph)}: within the bound", done.stdout)) == n, \
            done.stdout


@needs_mpi
def test_a_part_set_is_read_one_part_per_rank(tmp_path):
    folder = tmp_path / "power"
    graph = ROOT / "groute" / "data" / "power.mtx.gz"
    written = subprocess.run([sys.executable, "-m", "groute", "partition", "--graph", str(graph),
                              "--parts", "3", "--out", str(folder)], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    assert "as 3 parts" in written.stdout
    check(run_ranks(3, [program("loading_checks.py"), folder], timeout=120), 3, [str(folder)])
    # the whole-graph reference of a part set: its source file (ids from 1, as the file's)
    assert read_manifest(folder)["id_base"] == 1


def test_a_part_set_refuses_another_folders_files_and_bad_counts(tmp_path):
    g = load_graph("grid:5")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds other files"):
        write_part_set(g, 2, tmp_path)
    with pytest.raises(ValueError, match="between 1 and the vertex count"):
        write_part_set(g, 26, tmp_path / "new")
    with pytest.raises(ValueError, match="no manifest.json"):
        read_manifest(tmp_path)
    # a manifest.json or ids.npy that no part set's writer made is the user's: kept
    for name, write in (("manifest.json", lambda p: p.write_text('{"name": "webapp"}')),
                        ("ids.npy", lambda p: np.save(p, np.arange(5)))):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        write(folder / name)
        before = (folder / name).read_bytes()
        with pytest.raises(ValueError, match=f"holds other files \\({name}\\)"):
            write_part_set(g, 2, folder)
        assert (folder / name).read_bytes() == before
    write_part_set(g, 2, tmp_path / "set")
    write_part_set(g, 3, tmp_path / "set")          # over a part set: its files replaced
    assert read_manifest(tmp_path / "set")["parts"] == 3
    # in one process as across ranks, a part set is read as written (the options were ignored)
    for option in ({"symmetric": True}, {"columns": (1, 0)}):
        with pytest.raises(ValueError, match="a part set is read as groute partition wrote it"):
            load_graph(tmp_path / "set", **option)


def test_a_part_set_that_cannot_be_written_leaves_the_old_one_whole(tmp_path, monkeypatch):
    """A full disk mid-writing deleted the old set, left a part cut short and an error naming
    no file; a fresh folder kept half a set that the next writing then refused."""
    import groute.graph.part_set as part_set
    old, new = load_graph("grid:5"), load_graph("grid:6")
    write_part_set(old, 2, tmp_path / "set")
    real, calls = np.savez, []

    def full_disk(path, **arrays):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(path, **arrays)
    monkeypatch.setattr(part_set.np, "savez", full_disk)
    for folder in (tmp_path / "set", tmp_path / "fresh"):
        calls.clear()
        with pytest.raises(OSError, match=rf"{re.escape(str(folder))}/part-1-of-3\.npz: cannot "
                                          rf"write it \(No space left on device\)"):
            write_part_set(new, 3, folder)
    assert read_whole(tmp_path / "set").num_vertices == 25     # the old set, whole
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == []
    monkeypatch.setattr(part_set.np, "savez", real)
    for folder in (tmp_path / "set", tmp_path / "fresh"):
        write_part_set(new, 3, folder)
        assert read_whole(folder).num_vertices == 36


def test_a_writing_cut_short_while_its_files_are_put_in_place_is_written_over(tmp_path,
                                                                              monkeypatch):
    """Cut short between its renames, a writing leaves the old manifest beside a mix of parts:
    readers refuse it, and the next writing replaces it."""
    import os
    import groute.graph.part_set as part_set
    write_part_set(load_graph("grid:5"), 2, tmp_path)
    real, calls = os.replace, []

    def cut(a, b):
        calls.append(a)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(a, b)
    monkeypatch.setattr(part_set.os, "replace", cut)
    with pytest.raises(KeyboardInterrupt):
        write_part_set(load_graph("grid:6"), 2, tmp_path)
    monkeypatch.setattr(part_set.os, "replace", real)
    with pytest.raises(ValueError, match="a part of another writing of a part set"):
        read_whole(tmp_path)
    write_part_set(load_graph("grid:6"), 3, tmp_path)
    assert read_whole(tmp_path).num_vertices == 36
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json", "part-0-of-3.npz", "part-1-of-3.npz", "part-2-of-3.npz"]


def test_labels_of_another_part_set_are_refused(tmp_path):
    """An ids.npy copied from another set was read: answers under that set's labels."""
    import networkx as nx
    for name in ("a", "b"):
        G = nx.relabel_nodes(nx.path_graph(5), {i: f"{name}{i}" for i in range(5)})
        write_part_set(load_graph(G), 2, tmp_path / name)
    (tmp_path / "a" / "ids.npy").write_bytes((tmp_path / "b" / "ids.npy").read_bytes())
    with pytest.raises(ValueError, match=r"ids.npy: the labels of another writing of a part "
                                         r"set"):
        read_part(tmp_path / "a", 0, 2)


@pytest.mark.parametrize("labels, named", [
    ([0, 1, 2.5, 3, 4], "2.5 \\(float\\)"), (["0", 1, "2", "3", "4"], "1 \\(int\\)"),
    ([(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)], "\\(0, 0\\) \\(tuple\\)"),
    ([2**70, 1, 2, 3, 4], f"{2**70} \\(int\\)")])
def test_labels_a_part_set_would_read_back_as_other_ids_are_refused(tmp_path, labels, named):
    """Labels were written as text: a float or a big int came back as a string, "1" beside 1
    as two equal labels the reader refused, a tuple not at all."""
    import networkx as nx
    G = nx.relabel_nodes(nx.path_graph(5), dict(enumerate(labels)))
    with pytest.raises(ValueError, match=f"vertex label {named} cannot be kept in a part set"):
        write_part_set(load_graph(G), 2, tmp_path / "set")
    assert not (tmp_path / "set").exists()
    texts = nx.relabel_nodes(nx.path_graph(5), {i: f"v{i}" for i in range(5)})
    write_part_set(load_graph(texts), 2, tmp_path / "texts")
    assert read_whole(tmp_path / "texts").file_ids.tolist() == [f"v{i}" for i in range(5)]


def test_partition_reads_an_edge_lists_columns_as_the_commands_do(tmp_path, capsys):
    """Across processes --columns is refused on a file, pointing at a part set, but groute
    partition had no --columns: such a file could not run on several processes at all."""
    from groute.cli import main
    edges = tmp_path / "e.csv"
    edges.write_text("cost,to,from\n1,b,a\n2,c,b\n3,a,c\n4,e,d\n")
    assert main(["partition", "--graph", str(edges), "--parts", "2", "--out",
                 str(tmp_path / "set"), "--columns", "from,to,cost"]) == 0
    whole, direct = read_whole(tmp_path / "set"), load_graph(edges, columns=["from", "to", "cost"])
    assert whole.ids.tolist() == direct.ids.tolist()
    assert [a.tolist() for a in whole.edges()] == [a.tolist() for a in direct.edges()]
    assert whole.weights.tolist() == direct.weights.tolist()


def test_partition_checks_its_out_folder_before_loading(tmp_path, capsys, monkeypatch):
    """--out naming a file said only "X: not a folder" after the graph had loaded; --out ''
    wrote the part set into the working directory."""
    from groute.cli import main
    import groute.graph

    def loaded(*args, **kwargs):
        raise AssertionError("the graph loaded before --out was checked")
    monkeypatch.setattr(groute.graph, "load_graph", loaded)
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for out, message in [(str(a_file), f"--out {a_file}: a file, not a folder"),
                         ("", "--out '': give the folder to write the part set in")]:
        assert main(["partition", "--graph", "grid:4", "--parts", "2", "--out", out]) == 1
        assert message in capsys.readouterr().err


def _edit_manifest(folder, **fields):
    path = folder / "manifest.json"
    manifest = {**json.loads(path.read_text()), **fields}
    path.write_text(json.dumps({k: v for k, v in manifest.items() if v is not None}))


def _falling(indptr):
    indptr = indptr.copy()
    indptr[1] = indptr[-1]
    return indptr


def _cut(path, size):
    path.write_bytes(path.read_bytes()[:size])


def _flip(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _edit_part(folder, **arrays):
    path = folder / "part-1-of-2.npz"
    kept = {**dict(np.load(path)), **arrays}
    np.savez(path, **{k: v for k, v in kept.items() if v is not None})


@pytest.mark.parametrize("edit, error", [
    (lambda f: (f / "manifest.json").write_text("[1, 2]"), "not a groute-part-set version 1"),
    (lambda f: _edit_manifest(f, offsets=None), "'offsets' must be 3 ascending whole numbers"),
    (lambda f: _edit_manifest(f, offsets=[0, 10]), r"'offsets' must be .*, got \[0, 10\]"),
    (lambda f: _edit_manifest(f, vertices=30), "from 0 to the 30 vertices"),
    (lambda f: _edit_manifest(f, parts="2"), "'parts' must be a whole number >= 1, got '2'"),
    (lambda f: _edit_manifest(f, directed=None), "no 'directed'"),
    (lambda f: _edit_part(f, indices=np.full(3, 25)), "indptr must rise from 0 to its 3 arcs"),
    (lambda f: _edit_part(f, indptr=_falling(np.load(f / "part-1-of-2.npz")["indptr"])),
     "runs from 0 to [0-9]+ and falls"),
    (lambda f: _edit_part(f, indices=np.load(f / "part-1-of-2.npz")["indices"] + 20),
     "arc target 4[0-9] is not one of the 25 vertices"),
    (lambda f: _edit_part(f, indices=np.load(f / "part-1-of-2.npz")["indices"] * 1.0),
     "must be whole numbers in one dimension"),
    (lambda f: _edit_part(f, weights=None), "no weights, but the manifest says"),
    (lambda f: _edit_part(f, weights=np.ones(2)), "weights must be"),
    # a part cut short or with a byte flipped: zipfile's errors were tracebacks
    (lambda f: _cut(f / "part-1-of-2.npz", 300), "not a part file as groute partition writes"),
    (lambda f: _flip(f / "part-1-of-2.npz", -200), "not a part file as groute partition writes"),
])
def test_a_part_set_edited_or_cut_short_is_refused_naming_the_file(tmp_path, edit, error):
    """A manifest or part that is not what groute partition writes is a ValueError naming
    the file and what is wrong, before any rank runs on rows that would give wrong answers or
    fail deep inside a run."""
    folder = tmp_path / "grid"
    write_part_set(load_graph("grid:5"), 2, folder)
    edit(folder)
    with pytest.raises(ValueError, match=error) as raised:
        read_part(folder, 1, 2)
    assert str(folder) in str(raised.value)


def test_a_part_of_another_writing_of_the_set_is_refused(tmp_path):
    """Parts carry their writing's id: a part swapped in from another set of the same arc
    count (or an older writing) gave wrong answers without a word."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_part_set(load_graph("grid:6"), 2, a)
    write_part_set(load_graph("grid:6:high=2"), 2, b)      # same rows, other weights
    (a / "part-1-of-2.npz").write_bytes((b / "part-1-of-2.npz").read_bytes())
    read_part(a, 0, 2)
    with pytest.raises(ValueError, match="part-1-of-2.npz: a part of another writing"):
        read_part(a, 1, 2)
    with pytest.raises(ValueError, match="a part of another writing"):
        read_whole(a)


@needs_mpi
@pytest.mark.timeout(120)
def test_ranks_reading_different_writings_of_a_part_set_stop(tmp_path):
    """A stale copy of the set on one host (the same path, another writing, as each host's
    folder ``ps`` here): every rank stops, naming the set ids."""
    write_part_set(load_graph("grid:6"), 2, tmp_path / "host_a" / "ps")
    write_part_set(load_graph("grid:6:high=2"), 2, tmp_path / "host_b" / "ps")
    run = [sys.executable, "-m", "groute", "sssp", "--backend", "cpu", "--source", "0",
           "--graph", "ps"]
    line = [MPIEXEC, "-n", "1", "-wdir", str(tmp_path / "host_a"), *run, ":",
            "-n", "1", "-wdir", str(tmp_path / "host_b"), *run]
    proc = subprocess.run(line, cwd=ROOT, env=rank_environment(None), capture_output=True,
                          text=True, timeout=100)
    assert proc.returncode != 0, proc.stdout
    assert "the ranks read different writings of the part set" in proc.stderr, proc.stderr


def test_parts_holding_another_arc_count_than_the_manifest_are_refused(tmp_path):
    folder = tmp_path / "grid"
    write_part_set(load_graph("grid:5"), 2, folder)
    _edit_manifest(folder, arcs=7)
    with pytest.raises(ValueError, match="the parts hold .* arcs, but its manifest.json says 7"):
        read_whole(folder)
