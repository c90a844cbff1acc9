"""Every ``from groute... import name`` in the benchmark scripts and probes, also those inside
functions (most probes import where they need a name, after their GPU checks), still names
something: a probe is run by hand on GPUs, where a moved module would only show as an
ImportError in a device call."""
import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").rglob("*.py"))


def groute_imports(path: Path):
    """``(line, module, name)`` of every ``from groute... import name`` in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "groute" or node.module.startswith("groute.")):
            for alias in node.names:
                yield node.lineno, node.module, alias.name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_benchmark_script_imports_only_what_groute_has(path):
    missing = []
    for line, module, name in groute_imports(path):
        try:
            owner = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"line {line}: {module}: {exc}")
            continue
        if name == "*" or hasattr(owner, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            missing.append(f"line {line}: from {module} import {name}")
    assert not missing, f"{path.relative_to(ROOT)}: " + "; ".join(missing)
