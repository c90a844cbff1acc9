"""The examples of the user guide, the README and the operator tutorial run as written (on CPU
devices). A block fenced ```python runs; one that needs a GPU is fenced ```python no-run and says
why. And the docs keep to their budgets: what a newcomer reads first stays short, and
docs/bench keeps only the runs the docs cite (tests/test_doc_links.py checks the citations)."""
import re
from pathlib import Path

import pytest

from groute.errors import DeviceError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GUIDE = (DOCS / "USER_GUIDE.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE, re.S)
#: the complete example: the one that squares numbers on whichever device is free
EXAMPLE = next(b for b in BLOCKS if "first_available" in b)


def test_the_guide_has_examples():
    assert len(BLOCKS) >= 5 and "elements per device" in EXAMPLE


@pytest.mark.timeout(60)
@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_user_guide_block_runs(number, capsys):
    block = BLOCKS[number]
    exec(compile(block, f"USER_GUIDE.md block {number}", "exec"), {})
    if block is EXAMPLE:
        assert "elements per device" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_the_example_with_a_failing_worker_reports_that_worker():
    """One worker raising: the caller sees that device and that exception, not a stop."""
    failing = EXAMPLE.replace("        done = 0\n", "        done = 0\n        if j == 1:\n"
                              "            raise ZeroDivisionError('worker 1 gave up')\n")
    assert failing != EXAMPLE
    with pytest.raises(DeviceError, match="cpu:1: ZeroDivisionError: worker 1 gave up") as info:
        exec(compile(failing, "USER_GUIDE.md (failing worker)", "exec"), {})
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def _python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


@pytest.mark.timeout(120)
def test_readme_library_example_runs(capsys):
    blocks = [b for b in _python_blocks(ROOT / "README.md") if "groute.bfs" in b]
    assert blocks, "the README lost its library example"
    exec(compile(blocks[0], "README.md", "exec"), {})
    assert "Valjean" in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_readme_operator_api_apps_example_runs():
    blocks = [b for b in _python_blocks(ROOT / "README.md") if "groute.core_number" in b]
    assert blocks, "the README lost its example of the apps written on the operator API"
    exec(compile(blocks[0], "README.md", "exec"), {})


@pytest.mark.timeout(120)
def test_user_guide_graph_apps_example_runs(capsys):
    blocks = [b for b in _python_blocks(DOCS / "USER_GUIDE.md") if "groute.sssp" in b]
    assert blocks, "the user guide lost its graph apps example"
    exec(compile(blocks[0], "USER_GUIDE.md", "exec"), {})
    assert "graph apps: 4941 vertices reached" in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_readme_commands_on_the_shipped_graph_run(monkeypatch, capsys):
    """The README's command lines that need no GPU-sized graph, as written (on CPU devices)."""
    import shlex
    from groute.cli import main
    text = (ROOT / "README.md").read_text()
    lines = [line.split("#")[0].split() for line in text.splitlines()
             if line.startswith("groute ") and "groute/data/" in line]
    assert lines, "the README lost its example on the shipped graph"
    monkeypatch.chdir(ROOT)
    for words in lines:
        assert main(words[1:] + ["--backend", "cpu", "--repeat", "1"]) == 0, shlex.join(words)
    out = capsys.readouterr().out
    assert "4,941 of 4,941 vertices reached" in out


@pytest.mark.timeout(200)
def test_user_guide_functors_compile_for_cuda(tmp_path):
    """The CUDA bodies of the guide's functors compile (nvcc, no GPU needed), so the example
    that runs on CPU devices here also runs as written with backend="cuda"."""
    import shutil
    from groute.operators import Functor
    from support import compile_generated
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc to compile without a GPU")
    functors = []
    for number, block in enumerate(BLOCKS):
        if "Functor(" in block:
            names = {}
            exec(compile(block, f"USER_GUIDE.md block {number}", "exec"), names)
            functors += [f for f in names.values() if isinstance(f, Functor)]
    assert functors, "the guide lost its functor example"
    done = compile_generated(functors, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


#: the most lines the pages a newcomer reads first may have
LINE_BUDGETS = {"PERFORMANCE.md": 300, "OPERATORS.md": 300}
#: the most bytes of benchmark runs docs/bench may hold
BENCH_BYTES = 1_000_000


@pytest.mark.parametrize("name", sorted(LINE_BUDGETS))
def test_pages_keep_to_their_line_budget(name):
    lines = len((DOCS / name).read_text().splitlines())
    assert lines <= LINE_BUDGETS[name], f"docs/{name} has {lines} lines, over {LINE_BUDGETS[name]}"


def test_docs_bench_keeps_to_its_size():
    files = [p for p in (DOCS / "bench").rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert files and total <= BENCH_BYTES, f"docs/bench holds {total:,} bytes, over {BENCH_BYTES:,}"


@pytest.mark.timeout(120)
def test_the_operator_tutorial_starts_with_an_algorithm_on_cpu_devices_and_runs():
    """The tutorial's first code is a whole algorithm on groute.operators that runs on CPU
    devices, before any device code; and its blocks run in order, in one namespace (a later
    block may use what an earlier one defined)."""
    text = (DOCS / "OPERATORS.md").read_text()
    first = re.search(r"```(\w*)\n(.*?)```", text, re.S)
    assert first.group(1) == "python", f"the tutorial opens with a {first.group(1)} block"
    assert "from groute.operators import" in first.group(2) and 'backend="cpu"' in first.group(2)
    blocks = _python_blocks(DOCS / "OPERATORS.md")
    assert len(blocks) >= 3
    names = {}
    for number, block in enumerate(blocks):
        exec(compile(block, f"OPERATORS.md block {number}", "exec"), names)


@pytest.mark.timeout(200)
def test_the_operator_tutorial_functors_compile_for_cuda(tmp_path):
    """Its CUDA bodies compile (nvcc, no GPU needed), so its examples run as written with
    backend="cuda", as the tutorial says."""
    import shutil
    from groute.operators import Functor
    from support import compile_generated
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc to compile without a GPU")
    names = {}
    for number, block in enumerate(_python_blocks(DOCS / "OPERATORS.md")):
        exec(compile(block, f"OPERATORS.md block {number}", "exec"), names)
    functors = {f.name: f for f in names.values() if isinstance(f, Functor)}
    assert {"reach", "peelable", "lose_neighbour", "lower_label"} <= functors.keys()
    done = compile_generated(list(functors.values()), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
def test_networkx_md_lists_every_public_function():
    """docs/NETWORKX.md's table has a row for every groute.<function>, a new one too, and its
    signature there is the function's own (NetworkX's parameters, as it takes them)."""
    import inspect
    from groute import registry
    text = (DOCS / "NETWORKX.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)\((.*?)\)` \|", text, re.M))
    for name, function in registry.FUNCTIONS.items():
        assert name in rows, f"docs/NETWORKX.md has no row for groute.{name}"
        shown = [p.strip() for p in rows[name].split(",") if p.strip()]
        params = [p for p in inspect.signature(function).parameters.values()
                  if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert shown == [str(p).replace("'", '"') for p in params], name
