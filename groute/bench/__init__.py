"""``groute bench``: every app against its peers and the hardware floor, in one reproducible run.

:func:`run_suite` runs a :class:`BenchConfig` (see :func:`make_config` and :data:`PRESETS`) and
returns a JSON-ready dict; :mod:`.report` writes it as JSON and markdown, :mod:`.plots` draws it.
How to run it and what each column means: docs/BENCHMARKS.md.
"""
from .runner import run_suite
from .suite import APPS, PRESETS, BenchConfig, make_config

__all__ = ["run_suite", "BenchConfig", "make_config", "APPS", "PRESETS"]
