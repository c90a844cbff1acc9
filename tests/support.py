"""Helpers shared by test modules (import as ``from support import ...``).

Kept out of conftest.py on purpose: there are several conftest.py files (tests/, tests/graph/),
and ``from conftest import`` would pick whichever was imported first.
"""
from pathlib import Path

import pytest

#: the repository's sibling ``shared/graphs`` (absent on machines without it: tests skip)
SHARED_GRAPHS = Path(__file__).resolve().parents[1].parent / "shared" / "graphs"


def backends():
    """The backends to parametrise over: cpu always; cuda (marked ``gpu``) when a GPU is there."""
    return ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
