"""Moving one buffer through groute Links, as the packetization and broadcast benchmarks do.

The receiving side of a message runs on the destination device's host worker
(:meth:`groute.Context.submit`): it takes each :class:`~groute.PendingSegment` as the Link hands
it over and either just releases it once arrived (to time the transfer path alone), or copies it
into place in a destination buffer on its own stream and releases the receive buffer after that
copy -- and, in a ring, forwards the placed packet to the next device through the next Link
without waiting for the rest of the message.
"""
from __future__ import annotations

from groute import Link


def chunk_words(total_words: int, chunks: int) -> int:
    """Words per piece when ``total_words`` is cut into about ``chunks`` pieces (multiple of 4)."""
    per = -(-total_words // max(1, chunks))
    return max(4, -(-per // 4) * 4)


def cut_pieces(total_words: int, step: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` word ranges cutting ``total_words`` into pieces of ``step`` words (the last
    shorter): ``step`` is :func:`chunk_words`, which a caller that also sizes Link packets by it
    computes once."""
    return [(lo, min(lo + step, total_words)) for lo in range(0, total_words, step)]


def open_link(ctx, src, dst, packet_words: int, num_buffers: int, name: str, *,
              batching: bool = False) -> Link:
    return Link(src, dst, packet_size=packet_words, num_buffers=num_buffers, ctx=ctx, name=name,
                batching=batching)


def close_links(links) -> None:
    for link in links:
        link.close()
    for link in links:
        link.join()


def receive_message(link: Link, total_words: int, *, stream=None, dest=None, forward: Link | None = None):
    """Receive ``total_words`` words from ``link``; return the event after which they are complete.

    Without ``dest`` each packet is released as soon as it is handed over (its copy event guards
    buffer reuse). With ``dest`` each packet is copied to its place on ``stream`` and, with
    ``forward``, then sent on (the send waits for the placing copy, not for the host).
    """
    received = 0
    last = None
    while received < total_words:
        pending = link.receive()
        if pending is None:
            raise RuntimeError(f"{link.name} closed after {received} of {total_words} words")
        size = pending.size
        at = pending.metadata.get("at", 0) + pending.metadata["offset"]
        if dest is None:
            last = pending.event
            pending.release(after=pending.event)
        else:
            pending.wait_on(stream)
            place = dest[at:at + size]
            stream.copy(place, pending.data)
            last = stream.record()
            pending.release(after=last)
            if forward is not None:
                forward.send(place, event=last, metadata={"at": at})
        received += size
    return last
