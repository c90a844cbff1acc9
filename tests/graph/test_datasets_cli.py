"""Dataset registry and downloader (offline, file:// URLs) and the `groute data` subcommand."""
import argparse
import hashlib
import json
import re
import tarfile

import numpy as np
import pytest

from groute.graph import load_graph, write_mtx, write_snap
from groute.graph import datasets as ds
from groute.graph.datasets import DatasetError, Dataset


def run_cli(argv, capsys):
    """`groute <argv>` through the same register() hook groute.cli uses, and its error policy."""
    from groute.cli_support import common_parser
    from groute.errors import GrouteError
    from groute.graph import cli
    parser = argparse.ArgumentParser(prog="groute")
    cli.register(parser.add_subparsers(dest="command"), common_parser())
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except (GrouteError, ValueError, OSError) as exc:
        print(f"groute {args.command}: error: {exc}")
        rc = 1
    out = capsys.readouterr().out
    return rc, out


def test_groute_cli_lists_this_module():
    from groute.cli import TOOLS
    assert "groute.graph.cli" in TOOLS


def test_registry_entries_are_sane():
    names = [d.name for d in ds.REGISTRY.values()]
    assert len(set(n.lower() for n in names)) == len(names)
    for want in ("roadNet-CA", "soc-LiveJournal1", "web-Google", "USA-road-d.NY", "USA-road-d.USA",
                 "kron_g500-logn21", "europe_osm"):
        assert want in ds.REGISTRY
    for d in ds.REGISTRY.values():
        assert re.match(r"https?://[\w.-]+/\S+$", d.url), d.url
        assert d.format in ("snap", "dimacs", "mtx", "mtx-tar")
        assert d.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", d.sha256)
        assert d.description


def make_snap(tmp_path):
    g = load_graph("er:200:3:seed=1", cache=False)
    p = tmp_path / "src" / "tiny.txt.gz"
    p.parent.mkdir()
    write_snap(g, p)
    return p, g, hashlib.sha256(p.read_bytes()).hexdigest()


def test_download_file_url_verified(tmp_path, isolated_cache):
    p, g, digest = make_snap(tmp_path)
    extra = {"tiny": Dataset("tiny", p.as_uri(), "snap", "test graph", sha256=digest, symmetric=True)}
    r = ds.download("tiny", registry_extra=extra)
    assert r.verified and r.sha256 == digest and r.path == isolated_cache / "tiny.txt.gz"
    assert r.path.read_bytes() == p.read_bytes()
    assert not list(isolated_cache.glob("*.part"))
    again = ds.download("tiny", registry_extra=extra)
    assert not again.downloaded and again.verified


def test_download_wrong_checksum_leaves_nothing(tmp_path, isolated_cache):
    p, g, digest = make_snap(tmp_path)
    with pytest.raises(DatasetError, match="does not match"):
        ds.download("tiny", url=p.as_uri(), sha256="0" * 64)
    assert list(isolated_cache.iterdir()) == []        # no final file, no .part


def test_download_without_checksum_says_unverified(tmp_path):
    p, g, digest = make_snap(tmp_path)
    out = tmp_path / "out"
    r = ds.download("whatever", url=p.as_uri(), dir=out)
    assert not r.verified and any("not verified" in n for n in r.notes)
    assert (out / "tiny.txt.gz").is_file() and r.sha256 == digest


def test_a_file_name_another_download_holds_is_refused(tmp_path, isolated_cache):
    """Two URLs ending in the same file name: the second was "already downloaded" (its name
    then loaded the first one's graph), and with force it overwrote the first one's file."""
    p, g, digest = make_snap(tmp_path)
    other = tmp_path / "alt" / p.name
    other.parent.mkdir()
    write_snap(load_graph("er:50:2:seed=2", cache=False), other)
    first = ds.download("a", url=p.as_uri())
    for force in (False, True):
        with pytest.raises(DatasetError, match=r"already holds 'a', downloaded from file:.*; "
                                               r"download 'b' into another directory$"):
            ds.download("b", url=other.as_uri(), force=force)
    assert first.path.read_bytes() == p.read_bytes()          # a's file untouched
    assert ds.download("b", url=other.as_uri(), dir=tmp_path / "b").downloaded
    assert not ds.download("c", url=p.as_uri()).downloaded     # a's URL: a's file, named c
    taken = next(d for d in ds.REGISTRY.values() if d.format != "mtx-tar")
    mimic = tmp_path / "mimic" / taken.filename
    mimic.parent.mkdir()
    mimic.write_bytes(p.read_bytes())
    with pytest.raises(DatasetError, match=f"the file name of the registry's dataset "
                                           f"'{taken.name}'"):
        ds.download("mimic", url=mimic.as_uri())
    assert ds.download("mimic", url=mimic.as_uri(), dir=tmp_path / "elsewhere").downloaded
    assert ds.download(taken.name.lower(), url=mimic.as_uri()).downloaded   # its own name


def test_download_missing_source_is_oserror(tmp_path, isolated_cache):
    with pytest.raises(OSError):
        ds.download("nope", url=(tmp_path / "absent.txt").as_uri())
    assert not list(isolated_cache.glob("*")) or not list(isolated_cache.glob("absent*"))


def test_stale_part_file_is_replaced(tmp_path, isolated_cache):
    p, g, digest = make_snap(tmp_path)
    isolated_cache.mkdir(parents=True)
    (isolated_cache / "tiny.txt.gz.part").write_bytes(b"half a file")
    r = ds.download("tiny", url=p.as_uri(), sha256=digest)
    assert r.verified


def test_suitesparse_archive_extracted_and_loadable_by_name(tmp_path, isolated_cache, monkeypatch):
    g = load_graph("grid:9", weighted=False, cache=False)
    mtx = tmp_path / "gridtest.mtx"
    write_mtx(g, mtx)
    archive = tmp_path / "gridtest.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(mtx, arcname="gridtest/gridtest.mtx")
    reg = tmp_path / "registry.json"
    reg.write_text(json.dumps([{"name": "gridtest", "url": archive.as_uri(), "format": "mtx-tar",
                                "description": "test archive",
                                "sha256": hashlib.sha256(archive.read_bytes()).hexdigest()}]))
    monkeypatch.setenv("GROUTE_DATASETS", str(reg))
    r = ds.download("gridtest")
    assert r.path == isolated_cache / "gridtest.mtx" and r.verified
    h = load_graph("gridtest")
    assert np.array_equal(h.indices, g.indices) and not h.directed


def test_unknown_dataset_and_bad_registry(monkeypatch, tmp_path):
    with pytest.raises(DatasetError, match="unknown dataset"):
        ds.download("no-such-graph")
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    monkeypatch.setenv("GROUTE_DATASETS", str(bad))
    with pytest.raises(DatasetError, match="GROUTE_DATASETS"):
        ds.registry()


def test_cache_dir_resolution(monkeypatch, tmp_path):
    from groute.graph.cache import cache_root
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(tmp_path / "a"))
    assert cache_root() == tmp_path / "a"
    monkeypatch.delenv("GROUTE_CACHE_DIR")
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path / "b"))        # the older name
    assert cache_root() == tmp_path / "b"
    monkeypatch.delenv("GROUTE_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_root() == tmp_path / "x" / "groute"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache_root() == tmp_path / "h" / ".cache" / "groute"


def test_cli_list_get_info(tmp_path, capsys, isolated_cache):
    rc, out = run_cli(["data", "list"], capsys)
    assert rc == 0 and "roadNet-CA" in out and "snap.stanford.edu" in out
    p, g, digest = make_snap(tmp_path)
    rc, out = run_cli(["data", "get", "tiny", "--url", p.as_uri(), "--sha256", digest], capsys)
    assert rc == 0 and "verified" in out and digest in out and "NOT" not in out
    rc, out = run_cli(["data", "get", "tiny2", "--url", p.as_uri(), "--dir", str(tmp_path / "d")],
                      capsys)
    assert rc == 0 and "NOT verified" in out
    rc, out = run_cli(["data", "get", "tiny3", "--url", p.as_uri(), "--sha256", "ab" * 32,
                       "--force"], capsys)
    assert rc == 1 and "does not match" in out
    rc, out = run_cli(["data", "info", str(isolated_cache / "tiny.txt.gz")], capsys)
    assert rc == 0 and f"{g.num_edges:,} arcs" in out
    rc, out = run_cli(["data", "info", "grid:10", "--parts", "2", "--method", "contiguous", "--json"],
                      capsys)
    info = json.loads(out)
    assert rc == 0 and info["num_vertices"] == 100 and info["partition"]["num_parts"] == 2
    rc, out = run_cli(["data", "info", "kron:5", "-v"], capsys)
    assert rc == 0 and "32 vertices" in out
    rc, out = run_cli(["data", "info", str(tmp_path / "missing.mtx")], capsys)
    assert rc == 1 and "error" in out


def test_cli_info_reports_format_errors_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.gr"
    bad.write_text("p sp 2 1\na 1 5 1\n")
    rc, out = run_cli(["data", "info", str(bad)], capsys)
    assert rc == 1 and "bad.gr, line 2" in out and out.count("\n") == 1


def test_bench_readers_small_round_trip(tmp_path):
    from groute.graph import bench_readers
    (txt, gz), g = bench_readers.make_roadnet_like(tmp_path, side=40, drop=0.3)
    h = load_graph(gz, cache=False)
    assert h.num_edges == g.num_edges and h.num_vertices == g.num_vertices
    assert 2.4 < h.num_edges / h.num_vertices < 3.2        # roadNet-CA: 2.82 arcs per vertex


def test_cli_get_url_then_info_by_name(tmp_path, capsys, isolated_cache):
    p, g, digest = make_snap(tmp_path)
    rc, out = run_cli(["data", "get", "mine", "--url", p.as_uri(), "--dir", str(tmp_path / "d")],
                      capsys)
    assert rc == 0
    rc, out = run_cli(["data", "info", "mine", "--no-cache"], capsys)
    assert rc == 0 and f"{g.num_edges:,} arcs" in out
    rc, out = run_cli(["data", "list"], capsys)            # listed beside the registry
    [row] = [line for line in out.splitlines() if line.split()[:1] == ["mine"]]
    assert "yes" in row.split() and row.endswith(p.as_uri())


def test_cli_get_offline_names_the_url(tmp_path, capsys):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}/x.txt.gz"
    rc, out = run_cli(["data", "get", "x", "--url", url, "--dir", str(tmp_path)], capsys)
    assert rc == 1 and url in out and out.count("\n") == 1


def test_a_registry_file_s_bad_entries_are_named(monkeypatch, tmp_path):
    """An entry without url or format, or a JSON object for the list, failed inside the
    Dataset constructor (a TypeError naming its arguments)."""
    reg = tmp_path / "r.json"
    monkeypatch.setenv("GROUTE_DATASETS", str(reg))
    for entries, message in [
            ({"a": 1}, "a list of datasets, got a JSON dict"),
            ([{"name": "x"}], "entry 0: lacks url, format"),
            ([{"name": "x", "url": "file:///g", "format": "snap", "sz": 1}],
             "entry 0: has unknown sz"),
            (["x"], "entry 0: an object with name, url and format"),
            ([{"name": "", "url": "file:///g", "format": "snap"}],
             "entry 0: name and url are non-empty strings"),
            ([{"name": "x", "url": "file:///g", "format": "txt"}],
             "entry 0: format 'txt'; one of snap")]:
        reg.write_text(json.dumps(entries))
        with pytest.raises(DatasetError, match=f"GROUTE_DATASETS={re.escape(str(reg))}: "
                                               f"{re.escape(message)}"):
            ds.registry()


def test_a_download_s_format_is_how_its_name_loads(tmp_path, isolated_cache):
    """`data get NAME --url U --format F` recorded F, and the name then loaded by the file's
    own suffix: a DIMACS file named .txt was read as an edge list."""
    path = tmp_path / "roads.txt"
    path.write_text("c a road map\np sp 3 2\na 1 2 7\na 2 3 5\n")
    ds.download("roads", url=path.as_uri(), format="dimacs")
    g = load_graph("roads", cache=False)
    assert g.num_vertices == 3 and g.weights.tolist() == [7, 5]


def test_download_arguments_are_checked_before_fetching(tmp_path, isolated_cache):
    """An empty name was registered; a sha256 that is no hash was found out only after the
    whole download; a registered name given another file's URL loaded that file as the
    dataset while the registry still described its own."""
    p, g, digest = make_snap(tmp_path)
    for name in ("", "  ", "a/b"):
        with pytest.raises(DatasetError, match="a dataset's name is a non-empty word"):
            ds.download(name, url=p.as_uri())
    with pytest.raises(DatasetError, match="sha256 is 64 hexadecimal digits, got 'zz'"):
        ds.download("tiny", url=p.as_uri(), sha256="zz")
    registered = next(d for d in ds.REGISTRY.values() if d.format == "snap")
    with pytest.raises(DatasetError, match=f"{registered.name!r} is the registry's dataset "
                                           f"from .*give this download a name of its own"):
        ds.download(registered.name, url=p.as_uri())
    assert not list(isolated_cache.glob("*")) or not (isolated_cache / p.name).exists()


def test_a_url_that_is_no_url_and_a_dir_that_is_a_file_are_named(tmp_path, isolated_cache):
    """They failed as "unknown url type" and "[Errno 17] File exists"."""
    p, g, digest = make_snap(tmp_path)
    with pytest.raises(DatasetError, match="url 'notaurl': groute downloads http, https, file"):
        ds.download("x", url="notaurl")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(DatasetError, match=f"dir {a_file}: a file, not a folder"):
        ds.download("x", url=p.as_uri(), dir=a_file)


def test_a_download_whose_name_says_no_format_is_read_by_its_content(tmp_path, isolated_cache):
    """A URL ending in .csv was recorded as SNAP, and its name then failed to load (a SNAP
    line holds no comma); a name that says its format is read in it."""
    g = load_graph("er:60:3:seed=4", cache=False)
    src = tmp_path / "edges.csv"
    rows = [f"{u},{v}" for u, v in zip(*g.edges())]
    src.write_text("\n".join(rows) + "\n")
    ds.download("commas", url=src.as_uri())
    got = load_graph("commas", cache=False)
    src_ids, dst_ids = g.edges()
    assert got.num_edges == g.num_edges
    assert got.num_vertices == len(np.union1d(src_ids, dst_ids))    # the ids the file names
    assert ds.named_downloads()["commas"]["format"] is None
    p, _, _ = make_snap(tmp_path)
    ds.download("tiny", url=p.as_uri())
    assert ds.named_downloads()["tiny"]["format"] == "snap"
