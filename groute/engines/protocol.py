"""The layout of a persistent kernel's control block and its reader on the host: the host half
of ``groute/operators/persistent.cuh``, the one protocol of every persistent kernel that runs on
several devices (and of the one-device fused loop, whose block has the same head).

Every such kernel's control block (one per device, in its own memory) begins with the
protocol's :data:`PROTOCOL_WORDS` uint64 words; the kernel's own words follow
(:func:`own_words`). After a launch the host reads the block back once and
:meth:`LaunchStop.read` says where the launch stopped: what it ran and why it stopped (the
kernel's codes), whether it left early and why (:data:`ABORT_TIMEOUT`: a meeting timed out;
:data:`ABORT_OWN` and above: the kernel's own reasons), and the meetings it passed, which
:meth:`groute.engines.peer_barrier.CrossDeviceBarrier.finish` settles the meeting counter by
and raises from. Device 0's meeting block begins with :data:`MEETING_WORDS` words of the
protocol's (the counter, the flag of a device that gave up); a kernel's own device-0 words
follow.

No environment is read here (unlike :mod:`groute.engines.peer_barrier`), so the engines import
it when they are imported.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: persistent.cuh ProtocolWord: the protocol's uint64 words at the head of every persistent
#: kernel's control block (grid barrier, exit count, abort reason, meetings passed, and two int32:
#: what it ran, why it stopped)
PROTO_GRID, PROTO_EXIT, PROTO_ABORT, PROTO_CROSSED, PROTO_RESULT = range(5)
PROTOCOL_WORDS = 5
#: persistent.cuh AbortReason: a meeting timed out; this and above, a kernel's own reasons
ABORT_TIMEOUT, ABORT_OWN = 1, 2
#: persistent.cuh MeetingWord: the protocol's uint64 words of device 0's meeting block (the
#: counter, the flag of a device that gave up); a kernel's own words follow
MEETING_WORDS = 2


class LaunchStop(NamedTuple):
    """Where one device's launch stopped, as its control block's protocol words say."""
    device: str     # its name, for messages
    abort: int      # why it left early (0: it did not; ABORT_TIMEOUT; a kernel's own >= ABORT_OWN)
    crossed: int    # the meetings it arrived at
    ran: int        # the levels, rounds or iterations it ran
    status: int     # why it stopped, in the kernel's own codes

    @classmethod
    def read(cls, device: str, block) -> "LaunchStop":
        """The protocol's words of a control block read back to the host (``block``: its
        uint64 words, or any view of the same bytes), for the device named ``device``."""
        words = np.asarray(block).view(np.uint64)[:PROTOCOL_WORDS].tolist()   # Python ints
        result = words[PROTO_RESULT]    # two int32, the first in the low half (little-endian)
        return cls(device, words[PROTO_ABORT], words[PROTO_CROSSED], _int32(result),
                   _int32(result >> 32))

    @property
    def timed_out(self) -> bool:
        """Whether it gave up waiting at a meeting."""
        return self.abort == ABORT_TIMEOUT


def _int32(word: int) -> int:
    """The low 32 bits of ``word`` as a signed int32."""
    word &= 0xFFFFFFFF
    return word - (1 << 32) if word & 0x80000000 else word


def own_words(block):
    """The kernel's own words of a control block (``block``: its uint64 words), past the
    protocol's."""
    return block[PROTOCOL_WORDS:]
