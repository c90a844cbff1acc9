"""Segments: a view of a buffer plus its element count and metadata.

A :class:`PendingSegment` is a segment still arriving through a Link: its data may be read only
after :meth:`~PendingSegment.wait` (host blocks) or :meth:`~PendingSegment.wait_on` (a stream
waits; the host does not). Releasing it hands the receive buffer back to the link, which is how
back-pressure works: an unreleased segment holds one of the link's ``num_buffers`` buffers.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Segment:
    """``data`` holds exactly ``size`` elements along axis 0; ``metadata`` is free-form."""

    data: object
    metadata: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.data.shape[0])

    def __len__(self):
        return self.size


class PendingSegment:
    """A segment whose copy may still be in flight."""

    def __init__(self, data, event, metadata=None, release=None, source=None):
        self._segment = Segment(data, dict(metadata or {}))
        self.event = event          # None when the data is already in place
        self.source = source        # the endpoint it came from
        self._release = release
        self._released = False
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._segment.size

    @property
    def metadata(self) -> dict:
        return self._segment.metadata

    @property
    def data(self):
        """The received elements; valid after :meth:`wait` or :meth:`wait_on`."""
        return self._segment.data

    @property
    def segment(self) -> Segment:
        return self._segment

    def ready(self) -> bool:
        return self.event is None or self.event.query()

    def wait(self, timeout=None) -> Segment:
        """Block the host until the data has arrived; return the segment."""
        if self.event is not None:
            self.event.synchronize(timeout)
        return self._segment

    def wait_on(self, stream) -> Segment:
        """Make ``stream`` wait for the data (no host blocking); return the segment."""
        if self.event is not None:
            stream.wait_event(self.event)
        return self._segment

    def release(self, after=None) -> None:
        """Give the buffer back to the link; ``after``: an event that must complete first
        (e.g. the kernel that consumed it). Idempotent."""
        with self._lock:
            if self._released:
                return
            self._released = True
        if self._release is not None:
            self._release(after)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"<PendingSegment size={self.size} ready={self.ready()} meta={self.metadata}>"
