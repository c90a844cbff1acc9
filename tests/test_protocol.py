"""The one persistent protocol (groute/operators/persistent.cuh, its host half
groute.engines.protocol): the host's layout of the control block and device 0's meeting block
is the header's, a control block read back says where a launch stopped, and every persistent
kernel on several devices meets, times out and reports through the header rather than a copy
of its own."""
import re
from pathlib import Path

import numpy as np
import pytest

from groute.engines import protocol
from groute.engines.protocol import LaunchStop, own_words
from groute.operators.loop import AdvanceStep
from groute.operators.loop_source import multi_source, rounds_source
from groute.operators.rounds import Loop, Sweep

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "groute" / "operators" / "persistent.cuh"
#: the persistent kernels on several devices, hand-written
KERNELS = [ROOT / "groute" / "engines" / "relax" / "peer.cu",
           ROOT / "groute" / "engines" / "relax" / "linked.cu",
           ROOT / "groute" / "engines" / "iterate" / "iterate.cu"]


def _enum(text, name) -> dict:
    """The members of C enum ``name`` in ``text`` with their values (literals, or members named
    before)."""
    body = re.search(rf"enum {name} \{{(.*?)\}};", text, re.S)[1]
    values = {}
    for member, value in re.findall(r"(\w+) = (\w+)", re.sub(r"//[^\n]*", "", body)):
        values[member] = int(value) if value.isdigit() else values[value]
    return values


def test_the_host_reads_the_layout_the_header_declares():
    text = HEADER.read_text()
    words = _enum(text, "ProtocolWord")
    assert words == {"PROTO_GRID": protocol.PROTO_GRID, "PROTO_EXIT": protocol.PROTO_EXIT,
                     "PROTO_ABORT": protocol.PROTO_ABORT,
                     "PROTO_CROSSED": protocol.PROTO_CROSSED,
                     "PROTO_RESULT": protocol.PROTO_RESULT,
                     "PROTOCOL_WORDS": protocol.PROTOCOL_WORDS}
    assert _enum(text, "AbortReason") == {"ABORT_TIMEOUT": protocol.ABORT_TIMEOUT,
                                          "ABORT_OWN": protocol.ABORT_OWN}
    assert _enum(text, "MeetingWord") == {"MEET_COUNT": 0, "MEET_GAVE_UP": 1,
                                          "MEETING_WORDS": protocol.MEETING_WORDS}


def test_a_control_block_read_back_says_where_the_launch_stopped():
    block = np.zeros(protocol.PROTOCOL_WORDS + 3, np.uint64)
    block[protocol.PROTO_ABORT] = protocol.ABORT_TIMEOUT
    block[protocol.PROTO_CROSSED] = 7
    block[protocol.PROTO_RESULT:protocol.PROTO_RESULT + 1].view(np.int32)[:] = 41, 2
    block[protocol.PROTOCOL_WORDS:] = [10, 11, 12]
    stop = LaunchStop.read("cuda:1", block)
    assert stop == LaunchStop("cuda:1", protocol.ABORT_TIMEOUT, 7, 41, 2) and stop.timed_out
    # the same bytes as the kernels' own int32 words see them, read alike
    assert LaunchStop.read("cuda:1", block.view(np.int32)) == stop
    assert own_words(block).tolist() == [10, 11, 12]
    block[protocol.PROTO_ABORT] = protocol.ABORT_OWN
    assert not LaunchStop.read("cuda:1", block).timed_out
    # the two int32 of the result word keep their signs (a kernel's codes may be negative)
    block[protocol.PROTO_RESULT:protocol.PROTO_RESULT + 1].view(np.int32)[:] = -3, -2147483648
    assert LaunchStop.read("cuda:1", block)[3:] == (-3, -2147483648)
    block[protocol.PROTO_RESULT:protocol.PROTO_RESULT + 1].view(np.int32)[:] = 2147483647, -1
    assert LaunchStop.read("cuda:1", block)[3:] == (2147483647, -1)


def _claim():
    from groute.operators import Functor
    return Functor(name="claim", params="int* depth, int d",
                   cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;")


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.name)
def test_every_hand_written_kernel_meets_through_the_header(path):
    """peer.cu, linked.cu and iterate.cu include persistent.cuh, never wait at device 0's
    counter themselves, and report the meetings they passed through it."""
    text = path.read_text()
    assert '#include "persistent.cuh"' in text
    assert "cross_device_wait(" not in text
    assert "protocol_crossed(" in text and "protocol_result(" in text


def test_the_generated_kernels_on_several_devices_meet_through_the_header():
    """The fused loops, sweeps and rounds on several devices: their meetings are the header's
    (protocol_meet), and their results and meetings passed go to its words."""
    steps = [AdvanceStep(_claim(), "auto")]
    texts = [multi_source(steps, "d", "test"),
             rounds_source((Loop(steps, level="d", keep=True), Sweep(steps, level="d")), None,
                           None, "test", multi=True)]
    for text in texts:
        assert '#include "persistent.cuh"' in text
        assert "protocol_meet(r.tid == 0, r.ctl, r.bar_target, r.gbar, r.gtarget" in text
        assert "cross_device_wait(" not in text and "GROUTE_P_ABORT" not in text
        assert "protocol_crossed(r.ctl, r.gtarget, base, r.k)" in text
        assert "protocol_result(groute_ctl," in text
