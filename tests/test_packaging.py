"""What ``pip install groute`` installs: the wheel built from a copy of this checkout.

Only ``groute`` goes into site-packages (``apps/`` as ``groute.apps``, ``topology/`` as
``groute.topology``; checked in a fresh virtual environment too), with every module of the tree,
the shipped graph and the CUDA sources as its only data files, never what a run leaves behind
(graph and METIS caches, ``__pycache__``), and the installed copy imports without the
checkout's top-level folders.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import groute

ROOT = Path(__file__).resolve().parents[1]
#: what a source distribution holds: enough to build the wheel
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "groute", "apps", "topology")
#: folder in the checkout -> where it is installed
INSTALLED_AS = {"groute": "groute", "apps": "groute/apps", "topology": "groute/topology"}
#: files a run leaves in the tree: a parsed-graph cache and a METIS split next to the shipped
#: graph, and byte code
LEFT_BY_RUNS = ("groute/data/power.mtx.gz.groute-cache.npz",
                "groute/data/power.mtx.gz.metis-degw-k2-s0-0123456789abcdef.groute-cache.npz",
                "apps/__pycache__/bfs.cpython-311.pyc")


def setuptools_is_new_enough() -> bool:
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return major >= 77      # what pyproject.toml's build-system asks for


def expected_files() -> set[str]:
    """The checkout's modules and shipped data, by their installed paths."""
    out = {"groute/data/power.mtx.gz"}
    for folder, target in INSTALLED_AS.items():
        for path in (ROOT / folder).rglob("*"):
            rel = path.relative_to(ROOT / folder)
            if path.suffix in (".py", ".cu", ".cuh") and "__pycache__" not in rel.parts:
                out.add(f"{target}/{rel.as_posix()}")
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of this checkout in which a run has left caches and byte code."""
    pytest.importorskip("pip")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name)
        else:
            shutil.copy2(ROOT / name, src / name)
    for rel in LEFT_BY_RUNS:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(b"left by a run")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", str(src),
           "-w", str(tmp / "out")]
    if not setuptools_is_new_enough():  # build in isolation, fetching setuptools>=77
        cmd.remove("--no-index")
    else:
        cmd.append("--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp)
    if done.returncode and "No matching distribution found for setuptools" in done.stderr:
        pytest.skip("building needs setuptools>=77: not installed here, no index to fetch it from")
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = (tmp / "out").glob("groute-*.whl")
    return built


def test_wheel_installs_only_groute(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = f"groute-{groute.__version__}.dist-info"
    assert {n.split("/")[0] for n in names} == {"groute", dist_info}
    left = [n for n in names if n.endswith((".groute-cache.npz", ".pyc")) or "__pycache__" in n]
    assert not left, left


def test_wheel_holds_every_module_and_only_the_shipped_data(wheel):
    files = {n for n in zipfile.ZipFile(wheel).namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert files == expected_files(), (sorted(files - expected_files()),
                                       sorted(expected_files() - files))


def test_wheel_declares_the_license_and_the_command(wheel):
    z = zipfile.ZipFile(wheel)
    dist_info = f"groute-{groute.__version__}.dist-info"
    metadata = z.read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: BSD-3-Clause" in metadata.splitlines()
    assert z.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    assert "groute = groute.cli:main" in z.read(f"{dist_info}/entry_points.txt").decode()


def test_installed_copy_imports_without_the_checkout(wheel, tmp_path):
    """Every module of the installed package imports from site-packages alone, and none of them
    reaches for a top-level ``apps`` or ``topology``."""
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                           "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    script = (
        "import importlib, pkgutil, sys, groute\n"
        f"assert groute.__file__.startswith({str(target)!r}), groute.__file__\n"
        "names = [m.name for m in pkgutil.walk_packages(groute.__path__, 'groute.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "assert 'groute.apps.bfs' in names and 'groute.topology.cli' in names, names\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('apps', 'topology')))\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[]"


def test_fresh_venv_holds_only_groute_and_runs_the_command(wheel, tmp_path):
    """The wheel installed into a new virtual environment (its dependencies seen through the
    system site-packages): that environment's own site-packages holds ``groute`` and its
    dist-info and nothing else, and its ``groute`` command runs from outside the checkout."""
    import venv
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode and "no such option: --python" in done.stderr:
        pytest.skip("this pip cannot install into another environment (pip >= 22.3 can)")
    assert done.returncode == 0, done.stdout + done.stderr
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = subprocess.run([str(python), "-c", purelib], capture_output=True, text=True,
                          timeout=60).stdout.strip()
    installed = {p.name for p in Path(site).iterdir()}
    assert installed == {"groute", f"groute-{groute.__version__}.dist-info"}, sorted(installed)
    version = subprocess.run([str(env_dir / "bin" / "groute"), "--version"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert version.stdout.strip() == f"groute {groute.__version__}", version.stderr
