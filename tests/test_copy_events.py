"""CopyEvents: a copy stream's kept events and the sources its copies hold (groute/runtime/copy_events.py)."""
import gc
import weakref

import numpy as np
import pytest

from groute import Context, Link
from groute.runtime.copy_events import CopyEvents


class _Event:
    """An event as CUDA's: recording it again moves it to the later work."""

    def __init__(self):
        self.number = 0

    def query(self):
        return self.number <= _Stream.finished_through


class _Stream:
    """A stream whose copies finish when the test says (``finished_through``: the records done)."""

    finished_through = 0

    def __init__(self):
        self.records = 0

    def record(self, event=None):
        self.records += 1
        event = event or _Event()
        event.number = self.records
        return event


@pytest.fixture(autouse=True)
def _nothing_finished():
    _Stream.finished_through = 0
    yield


def test_an_event_is_recorded_again_only_once_every_slot_it_completes_is_released():
    stream = _Stream()
    events = CopyEvents.of(stream)
    first = events.record(3)                       # one copy into three slots
    events.released(first, 2)
    second = events.record(1)
    assert second is not first                     # a slot of the first copy is still held
    events.released(first)
    events.released(second)
    assert events.record(1) in (first, second)     # kept, recorded again
    assert CopyEvents.of(stream) is events


def test_the_sources_of_copies_done_are_let_go_and_their_events_recorded_again():
    """Under steady traffic (every slot released at once) each copy's source is held until its
    copy is seen done, and only then is its event recorded again: an event never moves while
    a held source still needs it to say when its own copy ended."""
    stream = _Stream()
    events = CopyEvents.of(stream)
    held, made = [], set()
    for k in range(100):
        event = events.record(1)
        made.add(id(event))
        source = np.zeros(4)
        held.append(weakref.ref(source))
        events.hold(event, source)
        events.released(event)                     # its slot is free again at once
        _Stream.finished_through = stream.records - 1   # every copy but the newest is done
        del source
    assert len(events._sources) <= 2
    assert sum(ref() is not None for ref in held) <= 2
    assert len(made) <= 3                          # a few events, recorded again


def test_a_source_is_kept_while_its_copy_runs():
    stream = _Stream()
    events = CopyEvents.of(stream)
    source = np.zeros(4)
    ref = weakref.ref(source)
    events.hold(events.record(1), source)
    del source
    events.hold(events.record(1), np.zeros(1))     # nothing finished: both held
    assert ref() is not None
    _Stream.finished_through = stream.records
    events.hold(events.record(1), np.zeros(1))
    assert ref() is None


def test_a_streams_copy_events_go_with_the_stream():
    stream = _Stream()
    events = CopyEvents.of(stream)
    events.hold(events.record(2), np.zeros(3))
    gone = weakref.ref(stream)
    del stream, events
    gc.collect()
    assert gone() is None


@pytest.mark.timeout(60)
def test_segments_never_released_give_their_events_back_when_their_link_is_gone():
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=2, num_buffers=4, ctx=ctx)
        events = link._events
        link.send(np.arange(8, dtype=np.int32))
        held = [link.receive(timeout=5) for _ in range(2)]     # taken, never released
        link.close()
        assert link.join(5)
        assert events._slots
        del link, held
        gc.collect()
        fresh = events.record(1)                   # counts what the gone link held
        assert list(events._slots) == [fresh]


def test_forgetting_takes_no_lock():
    """A link's finalizer may run on a thread that holds the lock (the garbage collector runs
    where an allocation happens to trigger it): forgetting must not wait for it."""
    stream = _Stream()
    events = CopyEvents.of(stream)
    event = events.record(1)
    with events._lock:
        events.forget([event], bytearray(b"\x00"))
    assert events.record(1) is event               # counted by the next record: free again


def test_a_copy_seen_done_keeps_its_event_while_a_slot_holds_it():
    stream = _Stream()
    events = CopyEvents.of(stream)
    event = events.record(2)
    events.hold(event, np.zeros(1))
    events.released(event)                         # one of its two slots
    _Stream.finished_through = stream.records
    events.hold(events.record(1), np.zeros(1))     # sees its copy done
    assert event not in events._free
    events.released(event)
    assert event in events._free


@pytest.mark.timeout(60)
def test_a_links_send_keeps_its_source_while_its_copy_waits():
    """The source of a send whose copy has not run yet stays alive after the caller drops it
    (a pooling allocator would otherwise hand its memory out while the copy reads it)."""
    import threading
    import time
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, num_buffers=4, ctx=ctx)
        gate = threading.Event()
        link.stream.submit(gate.wait, 5)           # the copies queue behind this
        source = np.arange(4, dtype=np.int32)
        kept = weakref.ref(source)
        link.send(source)
        link.send(np.arange(4, dtype=np.int32))    # another array: the copy plan's cache
        del source
        gc.collect()
        assert kept() is not None
        gate.set()
        for _ in range(2):
            link.receive(timeout=5).release()
        time.sleep(0)
        link.close()


def test_an_event_no_slot_holds_goes_back_once_its_copy_is_done():
    stream = _Stream()
    events = CopyEvents.of(stream)
    event = events.record(0)
    events.hold(event, np.zeros(1))
    assert not events._slots
    _Stream.finished_through = stream.records
    events.let_go()
    assert event in events._free and not events._sources


@pytest.mark.timeout(60)
def test_a_link_that_ends_lets_go_of_the_sources_of_its_done_copies():
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, num_buffers=4, ctx=ctx)
        source = np.arange(4, dtype=np.int32)
        kept = weakref.ref(source)
        link.send(source)
        link.receive(timeout=5).wait(timeout=5)     # its copy is done; no send after it
        del source
        link.close()
        assert link.join(5)
        gc.collect()
        assert kept() is None


@pytest.mark.timeout(60)
def test_a_broadcast_whose_copy_fails_holds_its_source_for_the_copies_before():
    """send_all's copies for the links before a failing one are on the stream: the stream's
    CopyEvents holds the source until they are done."""
    import threading
    from groute.runtime.link import send_all
    with Context(3, backend="cpu", timeout=10) as ctx:
        a, b, c = ctx.devices
        links = [Link(a, d, packet_size=4, num_buffers=2, share_stream="s") for d in (b, c)]

        def broken(*args):
            raise RuntimeError("copy engine on fire")
        links[1]._copy_run = broken
        gate = threading.Event()
        links[0].stream.submit(gate.wait, 5)        # the first link's copy waits behind this
        source = np.arange(4, dtype=np.int32)
        with pytest.raises(RuntimeError, match="on fire"):
            send_all(links, source)
        held = any(kept is source for _, kept in links[0]._events._sources)
        gate.set()
        assert held
