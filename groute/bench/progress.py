"""Progress while the suite runs (it takes minutes): one stderr line per finished step.

With tqdm installed the lines go above a progress bar; without it each line carries its
``[done/total]`` count. Nothing here affects the results.
"""
from __future__ import annotations

import importlib.util
import sys
import time


class Progress:
    """Counts finished steps out of ``total`` and reports each with a short line."""

    def __init__(self, total: int, *, stream=None, enabled: bool = True):
        self.total = max(int(total), 1)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self._bar = None
        if enabled and importlib.util.find_spec("tqdm") is not None and self.stream is sys.stderr:
            from tqdm import tqdm
            self._bar = tqdm(total=self.total, file=self.stream, unit="step", leave=False)

    def note(self, text: str) -> None:
        """A line that is not a step (loading a graph, computing a reference)."""
        self._write(f"         {text}")

    def step(self, text: str) -> None:
        """One step finished; ``text`` says which and how it went."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
        width = len(str(self.total))
        self._write(f"[{self.done:{width}d}/{self.total}] {text}  ({time.perf_counter() - self.t0:.0f} s)")

    def _write(self, line: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
