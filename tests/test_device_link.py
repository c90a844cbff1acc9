"""Device-initiated Links: the slot/flag protocol with kernels (CPU: functions on stream threads)
at both ends or the host receiving; back-pressure, the end, a stop, a timeout, bad use; the
header compiles (nvcc) and, on GPUs, kernels of a user's own send and receive through it."""
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from groute import Context, DeviceError, Link
from groute.runtime import DeviceLink
from support import context_or_skip, gpu_marks

ROOT = Path(__file__).resolve().parents[1]


def _sender(link, data, per):
    """A sending "kernel": the parts of ``data`` as packets tagged with their offsets."""
    def run():
        for off in range(0, data.shape[0], per):
            link.tx.send(data[off:off + per], tag=off)
    return run


def _receiver(link, out):
    """A receiving "kernel" that runs until the link ends, placing each packet by its tag."""
    def run():
        while True:
            n = link.rx.next()
            got = link.rx.receive(n)
            if got is None:
                return
            items, tag = got
            out[tag:tag + items.shape[0]] = items
            link.rx.release(n)
    return run


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_buffers", [1, 3, 8])
def test_kernels_at_both_ends_move_every_packet_through_few_slots(num_buffers):
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=5, num_buffers=num_buffers, ctx=ctx, initiated="device")
        assert isinstance(link, DeviceLink) and link.receiver == "device"
        data = np.arange(103, dtype=np.int32) * 3 - 7
        out = np.zeros_like(data)
        b.compute_stream.submit(_receiver(link, out))
        a.compute_stream.submit(_sender(link, data, 5))
        link.close()                                # after the sender, in stream order
        b.compute_stream.synchronize(10)
        np.testing.assert_array_equal(out, data)
        assert link.join(5) and link.finished
        assert int(link._head[0]) == 21 and int(link._tail[0]) == 22   # 21 packets; one claim saw the end
        link.check()


@pytest.mark.timeout(60)
def test_the_host_receives_in_order_and_its_releases_free_the_slots():
    """receiver='host': packets arrive as PendingSegments already in place (no event), with
    their number and tag; a sender of more packets than slots goes on only as the host
    releases; the iteration ends at the close."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, num_buffers=2, ctx=ctx, initiated="device", receiver="host")
        data = np.arange(22, dtype=np.int32)
        a.compute_stream.submit(_sender(link, data, 4))
        link.close()
        first = link.receive(timeout=5)
        assert first.event is None and first.metadata == {"packet": 0, "tag": 0}
        second = link.receive(timeout=5)
        assert link.poll() is None             # both slots held: the sender waits
        got = [first.data.copy(), second.data.copy()]
        first.release()
        second.release()
        for pending in link:
            got.append(pending.data.copy())
            assert pending.metadata["tag"] == 4 * (len(got) - 1)
            pending.release()
        np.testing.assert_array_equal(np.concatenate(got), data)
        assert link.stats == {"packets": 6, "elements": 22}
        assert link.receive(timeout=5) is None and link.join(5)


@pytest.mark.timeout(60)
def test_many_senders_at_once_each_packet_arrives_once():
    """Reservations are atomic: four sending threads (blocks of a kernel) and two receiving
    ones share one link; every item arrives exactly once."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=7, num_buffers=4, ctx=ctx, initiated="device")
        parts = [np.arange(1000 * t, 1000 * t + 300, dtype=np.int32) for t in range(4)]
        got, lock = [], threading.Lock()

        def receive():
            while (n := link.rx.next()) is not None:
                item = link.rx.receive(n)
                if item is None:
                    return
                with lock:
                    got.append(item[0].copy())
                link.rx.release(n)
        receivers = [threading.Thread(target=receive) for _ in range(2)]
        senders = [threading.Thread(target=_sender(link, p, 7)) for p in parts]
        for t in receivers + senders:
            t.start()
        for t in senders:
            t.join(10)
        link.close(a.copy_stream)
        for t in receivers:
            t.join(10)
        np.testing.assert_array_equal(np.sort(np.concatenate(got)), np.concatenate(parts))


@pytest.mark.timeout(60)
def test_a_receiver_that_never_releases_times_out_naming_the_link():
    with Context(2, backend="cpu", timeout=0.5) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=2, num_buffers=1, ctx=ctx, initiated="device",
                    receiver="host", name="stuck")
        a.compute_stream.submit(_sender(link, np.arange(6, dtype=np.int32), 2))
        held = link.receive(timeout=5)
        with pytest.raises(DeviceError, match=r"WaitTimeout.*kernel waited longer than 0.5 s on stuck"):
            a.compute_stream.synchronize(5)       # the sending "kernel" gave up: its stream failed
        assert ctx.stop_event.wait(5)
        held.release()


@pytest.mark.timeout(60)
def test_a_stop_makes_waiting_kernels_give_up():
    """The context stops (a failure elsewhere): a sender waiting for a slot and a receiver
    waiting for a packet both give up within a poll interval, not at the timeout."""
    import time
    with Context(2, backend="cpu", timeout=30) as ctx:
        a, b = ctx.devices
        full = Link(a, b, packet_size=2, num_buffers=1, ctx=ctx, initiated="device")
        empty = Link(a, b, packet_size=2, num_buffers=1, ctx=ctx, initiated="device")
        a.compute_stream.submit(_sender(full, np.arange(6, dtype=np.int32), 2))
        b.compute_stream.submit(_receiver(empty, np.zeros(4, np.int32)))
        time.sleep(0.2)
        started = time.monotonic()
        ctx.fail("elsewhere", RuntimeError("a device failed"))
        for stream in (a.compute_stream, b.compute_stream):
            with pytest.raises(Exception):
                stream.synchronize(10)
        assert time.monotonic() - started < 5
        assert full.join(5) and empty.join(5)


class _Slow:
    """An array whose slicing (what a part reads to write its share) first sleeps ``delay``: a
    part that lags the others, so a packet published or released before its last part would
    show."""

    def __init__(self, array, delay):
        self.array, self.delay, self.shape = array, delay, array.shape

    def __getitem__(self, key):
        import time
        time.sleep(self.delay)
        return self.array[key]


@pytest.mark.timeout(60)
def test_a_packet_written_by_several_blocks_is_published_once_after_the_last():
    """Two groups of three "blocks" (threads) send 12 packets of 9 items through 2 slots, each
    block its share of each packet (send_part); one block of each group lags. The receiver sees
    every packet whole (published after its last share, not at the first), in order, once."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=9, num_buffers=2, ctx=ctx, initiated="device", receiver="host")
        data = np.arange(12 * 9, dtype=np.int32) + 1
        groups, parts = 2, 3

        def block(group, part):
            for i in range(group, 12, groups):
                packet = data[i * 9:(i + 1) * 9]
                link.tx.send_part(i, _Slow(packet, 0.01) if part == 1 else packet, i, part, parts)
        blocks = [threading.Thread(target=block, args=(g, p)) for g in range(groups) for p in range(parts)]
        for t in blocks:
            t.start()
        got = []
        for _ in range(12):
            pending = link.receive(timeout=5)
            got.append((pending.metadata["tag"], pending.data.copy()))
            pending.release()
        for t in blocks:
            t.join(10)
        assert [tag for tag, _ in got] == list(range(12))
        np.testing.assert_array_equal(np.concatenate([items for _, items in got]), data)
        assert link._written.tolist() == [0, 0]       # each slot's count starts again at 0
        link.close(a.copy_stream)


@pytest.mark.timeout(60)
def test_a_slot_read_by_several_blocks_goes_back_after_the_last():
    """Three receiving "blocks" read shares of each packet and release_part it; one lags. With
    one slot, the sender's next packet would overwrite the lagging share if the slot went back
    at the first release: every share read must be the packet's own."""
    import time
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=6, num_buffers=1, ctx=ctx, initiated="device")
        data = np.arange(8 * 6, dtype=np.int32) * 5
        out = np.zeros_like(data)
        parts = 3

        def block(part):
            for n in range(8):
                items, tag = link.rx.receive(n)
                if part == 2:
                    time.sleep(0.01)
                lo, hi = part * 2, part * 2 + 2
                out[tag * 6 + lo:tag * 6 + hi] = items[lo:hi]
                link.rx.release_part(n, parts)
        readers = [threading.Thread(target=block, args=(p,)) for p in range(parts)]
        for t in readers:
            t.start()
        for off in range(0, data.size, 6):
            link.tx.send(data[off:off + 6], tag=off // 6)
        for t in readers:
            t.join(10)
        np.testing.assert_array_equal(out, data)
        assert link._taken.tolist() == [0]
        link.close(a.copy_stream)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("parts", [1, 4])
def test_grid_messages_follow_one_another_through_the_link(parts):
    """send_grid / receive_grid (the grid functions of link.cuh, the blocks one after another
    here): two messages of 23 and 7 items in packets of 5 through 2 slots, the second numbered
    after the first; a receiver that waits for more than was sent learns that the link ended."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=5, num_buffers=2, ctx=ctx, initiated="device")
        first, second = np.arange(23, dtype=np.int32), np.arange(7, dtype=np.int32) - 50
        out1, out2 = np.zeros_like(first), np.zeros_like(second)
        b.compute_stream.submit(link.rx.receive_grid, 0, out1, 23, parts)
        b.compute_stream.submit(link.rx.receive_grid, 5, out2, 7, parts)
        a.compute_stream.submit(link.tx.send_grid, 0, first, parts)
        a.compute_stream.submit(link.tx.send_grid, 5, second, parts)
        link.close()
        b.compute_stream.synchronize(10)
        np.testing.assert_array_equal(out1, first)
        np.testing.assert_array_equal(out2, second)
        assert int(link._head[0]) == 7 and int(link._tail[0]) == 7
        assert link.rx.receive_grid(7, None, 1, parts) is False   # closed after 7 packets
        assert link.join(5)


def test_grid_shape_splits_large_packets_over_blocks(cpu_ctx):
    """One block per packet and a packet per slot for packets up to PART_BYTES; shares of
    PART_BYTES for larger ones, half the slots in flight; the whole grid for a packet of more
    than GROUP_PARTS shares; at most MAX_GROUPS groups; never more blocks than allowed."""
    from groute.runtime.device_link import MAX_GROUPS, PART_BYTES
    a, b = cpu_ctx.devices[:2]
    small = Link(a, b, 1024, 64, ctx=cpu_ctx, initiated="device")         # 4 KiB
    mid = Link(a, b, 16 * 1024, 64, ctx=cpu_ctx, initiated="device")      # 64 KiB
    big = Link(a, b, 1 << 18, 16, ctx=cpu_ctx, initiated="device")        # 1 MiB
    large = Link(a, b, 4 << 20, 4, ctx=cpu_ctx, initiated="device")       # 16 MiB
    assert small.grid_shape(1024, 528) == (64, 1)
    assert small.grid_shape(3, 528) == (3, 1)
    many = Link(a, b, 16 * 1024, 256, ctx=cpu_ctx, initiated="device")   # 64 KiB, 256 slots
    assert many.grid_shape(1024, 528) == (MAX_GROUPS, 1)
    many.close()
    assert mid.grid_shape(1024, 528) == (64, 1)
    assert mid.grid_shape(1024, 528, part_bytes=4096) == (32 * 16, 16)
    assert big.grid_shape(256, 528) == (8 * 16, 16)
    assert large.grid_shape(16, 528) == (528, 528)      # past GROUP_PARTS shares: every block
    assert large.grid_shape(16, 528, part_bytes=large.packet_bytes) == (4, 1)
    assert big.grid_shape(64, 8) == (8, 8)              # one group of every block allowed
    assert mid.packet_bytes == PART_BYTES
    for bad in ({"packets": 0, "blocks": 4}, {"packets": 1, "blocks": 0}):
        with pytest.raises(ValueError, match=next(iter(k for k, v in bad.items() if v == 0))):
            mid.grid_shape(**bad)
    for link in (small, mid, big, large):
        link.close()


def test_bad_device_links_are_clear_errors(cpu_ctx):
    from groute import HOST
    a, b = cpu_ctx.devices[:2]
    with pytest.raises(ValueError, match="between two devices"):
        Link(HOST, b, 4, initiated="device")
    with pytest.raises(ValueError, match="receiver must be 'device' or 'host'"):
        Link(a, b, 4, initiated="device", receiver="kernel")
    with pytest.raises(ValueError, match="packet_size"):
        Link(a, b, 0, initiated="device")
    link = Link(a, b, 4, ctx=cpu_ctx, initiated="device")
    with pytest.raises(RuntimeError, match="kernels receive on this link"):
        link.receive()
    with pytest.raises(ValueError, match=r"holds 0..4 items, got 5"):
        link.tx.publish(link.tx.reserve(), 5)
    # a close on something that is no stream of the sender failed inside it, link left open
    for stream in ("compute", b.compute_stream):
        with pytest.raises(TypeError, match=r"close takes a stream of the sender cpu:0"):
            link.close(stream=stream)
        assert not link.closed
    link.close(stream=a.compute_stream)
    assert link.closed


@pytest.mark.timeout(60)
def test_poll_never_blocks_while_another_thread_receives():
    """A poll that finds packet 0 arrived while another thread is inside receive (holding
    the receiver's turn) returned that thread's wait: up to the timeout."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, num_buffers=2, ctx=ctx, initiated="device",
                    receiver="host")
        a.compute_stream.submit(_sender(link, np.arange(4, dtype=np.int32), 4))
        a.compute_stream.synchronize(5)
        polled = []
        with link._receive_lock:                # another receiver's turn
            t = threading.Thread(target=lambda: polled.append(link.poll()), daemon=True)
            t.start()
            t.join(2)
            assert polled == [None], "poll waited for the other receiver"
        first = link.poll()
        assert first is not None and first.metadata == {"packet": 0, "tag": 0}
        first.release()
        assert link.poll() is None
        link.close()
        assert link.receive(timeout=5) is None


@pytest.mark.timeout(60)
def test_join_waits_the_links_timeout_and_host_only_options_are_refused():
    with Context(2, backend="cpu", timeout=0.3) as ctx:
        a, b = ctx.devices
        link = Link(a, b, 4, ctx=ctx, initiated="device")
        t0 = time.monotonic()
        assert link.join() is False             # never closed: the context's 0.3 s
        assert time.monotonic() - t0 < 5
        link.close()
        assert link.join()
        for option in ({"batching": True}, {"copy_on": "dst"}):
            with pytest.raises(TypeError, match=f"{next(iter(option))}: for host-initiated "
                                                f"Links only"):
                Link(a, b, 4, ctx=ctx, initiated="device", **option)


@pytest.mark.timeout(60)
def test_a_packet_of_another_dtype_or_too_many_items_is_refused_naming_the_link(cpu_ctx):
    """As a host-initiated Link's send: the CPU functions would cast float64 items into the
    int32 slots (silently truncated) where a CUDA kernel copies their bytes."""
    a, b = cpu_ctx.devices[:2]
    link = Link(a, b, 4, ctx=cpu_ctx, initiated="device", name="typed")
    for bad in (np.arange(4.0) + 0.5, np.arange(4, dtype=np.int8), np.zeros((4, 2), np.int32)):
        with pytest.raises(ValueError, match="typed: carries int32 items of shape"):
            link.tx.send(bad)
        with pytest.raises(ValueError, match="typed: carries int32"):
            link.tx.send_part(0, bad, 0, 0, 1)
        with pytest.raises(ValueError, match="typed: carries int32"):
            link.tx.send_grid(0, np.concatenate([bad, bad]), 2)
    with pytest.raises(ValueError, match="typed: send_grid sends a 1-d or wider array"):
        link.tx.send_grid(0, np.int32(3), 1)
    with pytest.raises(ValueError, match=r"typed: a packet holds 0..4 items, got 8"):
        link.tx.send(np.arange(8, dtype=np.int32))
    with pytest.raises(ValueError, match=r"typed: a packet holds 0..4 items, got a 0-d array"):
        link.tx.send(np.int32(3))
    for tag in (-1, 2**64):                 # failed inside NumPy
        with pytest.raises(ValueError, match=r"typed: a packet's tag is in \[0, 2\^64\)"):
            link.tx.send(np.arange(2, dtype=np.int32), tag=tag)
    for tag in (1.7, "x", True):            # 1.7 was taken as 1
        with pytest.raises(TypeError, match=r"typed: a packet's tag is an int"):
            link.tx.send(np.arange(2, dtype=np.int32), tag=tag)
    items = np.arange(8, dtype=np.int32)
    for parts in (0, -1, 1.5):              # 0: nothing sent, and the receiver waited it out
        with pytest.raises(ValueError, match=r"typed: send_grid's parts .* must be an int >= 1"):
            link.tx.send_grid(0, items, parts)
        with pytest.raises(ValueError, match=r"typed: receive_grid's parts .* must be an int >= 1"):
            link.rx.receive_grid(0, np.zeros(8, np.int32), 8, parts)   # said True, read nothing
    with pytest.raises(ValueError, match=r"typed: receive_grid takes an int count of items"):
        link.rx.receive_grid(0, None, -4, 1)
    for call in (lambda: link.tx.send_grid(-1, items, 1),       # waited out the timeout
                 lambda: link.rx.receive_grid(-1, None, 8, 1)):
        with pytest.raises(ValueError, match=r"typed: \w+_grid's first packet number is an int "
                                             r">= 0, got -1"):
            call()
    with pytest.raises(ValueError, match=r"typed: receive_grid places 8 items, into a dst of "
                                         r"shape \(6,\)"):        # NumPy's broadcast error
        link.rx.receive_grid(0, np.zeros(6, np.int32), 8, 1)
    assert int(link._head[0]) == 0          # nothing reserved: the packets a receiver waits for
    link.close()


@pytest.mark.timeout(60)
def test_a_grid_receiver_places_no_more_than_its_count_and_a_send_after_close_is_refused():
    """A message longer than the receiver's count: only ``count`` items land in ``dst`` (the
    rest of the last packet was written past them). After the close, a send is refused (the
    receivers were told how many packets there were)."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, num_buffers=2, ctx=ctx, initiated="device")
        out = np.full(9, -1, np.int32)
        b.compute_stream.submit(link.rx.receive_grid, 0, out[:6], 6, 1)
        a.compute_stream.submit(link.tx.send_grid, 0, np.arange(8, dtype=np.int32), 1)
        b.compute_stream.synchronize(10)
        assert out.tolist() == [0, 1, 2, 3, 4, 5, -1, -1, -1]
        link.close()
        a.compute_stream.synchronize(10)
        for send in (lambda: link.tx.send(np.arange(2, dtype=np.int32)),
                     lambda: link.tx.send_grid(2, np.arange(8, dtype=np.int32), 1)):
            with pytest.raises(RuntimeError, match="a send after the link was closed"):
                send()


def test_the_header_and_the_link_kernels_compile(tmp_path):
    """link.cuh, the runtime's kernels, the benchmark's and the GPU tests' compile with nvcc (no
    GPU needed), the struct's field offsets as device_link.py packs them."""
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    from groute.kernels import include_options
    from groute.runtime.device_link import FIELDS
    check = tmp_path / "offsets.cu"
    check.write_text('#include <cstddef>\n#include "link.cuh"\n' + "".join(
        f'static_assert(offsetof(groute_link, {f}) == {8 * i}, "{f}");\n' for i, f in enumerate(FIELDS)))
    user = tmp_path / "user_kernels.cu"
    user.write_text(USER_KERNELS)
    for source in (check, ROOT / "groute/runtime/link_kernels.cu", ROOT / "topology/link_kernels.cu", user):
        done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", *include_options(), "-c",
                               str(source), "-o", str(tmp_path / "out.o")],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]


# GPU --------------------------------------------------------------------------------------------
USER_KERNELS = r'''
#include "link.cuh"
// every block sends packets of `per` items from src until it runs out; tag = the offset
extern "C" __global__ void send(const groute_link* link, const int* src, unsigned long long n,
                                unsigned long long per, unsigned long long* next) {
    __shared__ unsigned long long part;
    while (true) {
        if (threadIdx.x == 0) part = atomicAdd(next, 1ull);
        __syncthreads();
        const unsigned long long mine = part;
        __syncthreads();
        if (mine * per >= n) return;
        const unsigned long long count = min(per, n - mine * per);
        if (!groute_link_send_block(*link, src + mine * per, count, mine * per)) return;
    }
}
// every block receives until the link ends, placing each packet at its tag
extern "C" __global__ void receive(const groute_link* link, int* dst) {
    __shared__ unsigned long long n;
    while (true) {
        if (threadIdx.x == 0) n = groute_link_next(*link);
        __syncthreads();
        const unsigned long long mine = n;
        __syncthreads();
        unsigned long long count, tag;
        bool ended;
        const int* slot = (const int*)groute_link_receive_block(*link, mine, &count, &tag, &ended);
        if (slot == nullptr) return;
        groute_link_copy_block(dst + tag, slot, count * 4);
        groute_link_release_block(*link, mine);
    }
}
// the grid sends (receives and places) a message of n items as packets first, first + 1, ...,
// `parts` blocks per packet
extern "C" __global__ void send_grid(const groute_link* link, const int* src, unsigned long long n,
                                     unsigned long long first, unsigned long long parts) {
    groute_link_send_grid(*link, first, src, n, parts);
}
extern "C" __global__ void receive_grid(const groute_link* link, int* dst, unsigned long long n,
                                        unsigned long long first, unsigned long long parts) {
    groute_link_receive_grid(*link, first, dst, n, parts);
}
'''


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", [pytest.param("cuda", marks=gpu_marks(2))])
@pytest.mark.parametrize("receiver", ["device", "host"])
def test_cuda_user_kernels_send_through_the_link(backend, receiver):
    """A user's RawKernel (include_options) sends from several blocks; kernels or the host
    receive; the bytes arrive in place, the link ends at the close."""
    import cupy
    from groute.kernels import include_options, preload
    ctx = context_or_skip(backend, 2, timeout=20)
    try:
        a, b = ctx.devices
        link = Link(a, b, packet_size=1000, num_buffers=4, ctx=ctx, initiated="device", receiver=receiver)
        data = np.arange(123_457, dtype=np.int32) * 7
        with a.use():
            src, next_part = a.asarray(data), a.zeros(1, np.uint64)
            send = cupy.RawKernel(USER_KERNELS, "send", options=("-std=c++17", *include_options()))
            preload(send)       # both loaded before either runs (device_link's docstring)
        with b.use():
            dst = b.zeros(data.size, np.int32)
            receive = cupy.RawKernel(USER_KERNELS, "receive", options=("-std=c++17", *include_options()))
            preload(receive)
        if receiver == "device":
            b.compute_stream.submit(receive, (8,), (256,), (link.rx, dst))
        a.compute_stream.submit(send, (6,), (256,), (link.tx, src, np.uint64(data.size),
                                                      np.uint64(1000), next_part))
        link.close()
        if receiver == "host":
            for pending in link:
                tag = pending.metadata["tag"]
                b.compute_stream.copy(dst[tag:tag + pending.size], pending.data)
                pending.release(after=b.compute_stream.record())
        b.compute_stream.synchronize(20)
        np.testing.assert_array_equal(b.to_host(dst), data)
        assert link.join(10)
        link.check()
    finally:
        ctx.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", [pytest.param("cuda", marks=gpu_marks(2))])
@pytest.mark.parametrize("packet_size, part_bytes", [(1000, 256), (1 << 18, None)])
def test_cuda_grids_send_and_place_packets_written_by_many_blocks(backend, packet_size, part_bytes):
    """groute_link_send_grid / _receive_grid with several blocks per packet (uneven shares of
    4000-byte packets; 1 MiB packets in shares of grid_shape's default): two messages, the second
    numbered after the first, arrive in place through fewer slots than packets."""
    import cupy
    from groute.kernels import include_options, preload
    ctx = context_or_skip(backend, 2, timeout=20)
    try:
        a, b = ctx.devices
        link = Link(a, b, packet_size=packet_size, num_buffers=4, ctx=ctx, initiated="device")
        messages = [np.arange(n, dtype=np.int32) * 3 + k for k, n in
                    enumerate((9 * packet_size + 17, 5 * packet_size))]
        options = ("-std=c++17", *include_options())
        with a.use():
            send = cupy.RawKernel(USER_KERNELS, "send_grid", options=options)
            preload(send)
        with b.use():
            receive = cupy.RawKernel(USER_KERNELS, "receive_grid", options=options)
            preload(receive)
        extra = {} if part_bytes is None else {"part_bytes": part_bytes}
        first, outs = 0, []
        for data in messages:
            packets = -(-data.size // packet_size)
            blocks, parts = link.grid_shape(packets, 256, **extra)
            assert parts > 1
            with a.use():
                src = a.asarray(data)
            with b.use():
                outs.append(b.zeros(data.size, np.int32))
            args = (np.uint64(data.size), np.uint64(first), np.uint64(parts))
            b.compute_stream.submit(receive, (blocks,), (256,), (link.rx, outs[-1], *args))
            a.compute_stream.submit(send, (blocks,), (256,), (link.tx, src, *args))
            first += packets
        link.close()
        b.compute_stream.synchronize(20)
        for data, out in zip(messages, outs):
            np.testing.assert_array_equal(b.to_host(out), data)
        assert link.join(10)
        link.check()
        assert int(link._head.get()[0]) == first
    finally:
        ctx.shutdown()


def test_the_user_guides_cuda_kernels_compile(tmp_path):
    """The guide's device-initiated example in CUDA (its ```cuda blocks) compiles against the
    header as written (nvcc, no GPU needed)."""
    import re
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    from groute.kernels import include_options
    blocks = re.findall(r"```cuda\n(.*?)```", (ROOT / "docs/USER_GUIDE.md").read_text(), re.S)
    assert blocks and any("groute_link_send_block" in b for b in blocks)
    for number, block in enumerate(blocks):
        source = tmp_path / f"guide{number}.cu"
        source.write_text(block)
        done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", *include_options(), "-c",
                               str(source), "-o", str(tmp_path / "out.o")],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_a_device_link_is_made_while_a_kernel_runs_on_the_compute_stream():
    """A link's words are made on the copy stream: making one does not wait for a kernel
    already running on either device's compute stream (one that waits for this link would
    never end). The first link made on the GPU, before the kernel, loads the link's kernels
    (which may wait for running kernels: device_link's docstring)."""
    import time
    from support import spin
    with context_or_skip("cuda", 1, timeout=5) as ctx:
        dev = ctx.devices[0]
        Link(dev, dev, packet_size=4, num_buffers=2, ctx=ctx, initiated="device").close()
        dev.compute_stream.synchronize()
        spin(dev, "compute", 2.0)
        t0 = time.perf_counter()
        link = Link(dev, dev, packet_size=4, num_buffers=2, ctx=ctx, initiated="device")
        assert time.perf_counter() - t0 < 1.0
        link.close()
        dev.compute_stream.synchronize()


@pytest.mark.gpu
@pytest.mark.timeout(60)
@pytest.mark.parametrize("receiver", ["device", "host"])
def test_a_device_link_dropped_while_a_kernel_runs_does_not_wait_for_it(receiver):
    """A link's mapped host memory (its status, a host receiver's flags) goes back to a pool
    when the link is gone, not to CUDA: freeing pinned memory waits for every running kernel,
    so dropping a finished link while a kernel ran stalled the dropping thread (the link
    pump's, or the next link's maker) until the kernel ended."""
    import gc
    import time
    from support import spin
    with context_or_skip("cuda", 1, timeout=5) as ctx:
        dev = ctx.devices[0]
        link = Link(dev, dev, packet_size=4, num_buffers=2, ctx=ctx, initiated="device",
                    receiver=receiver)
        link.close()
        assert link.join(5)
        spin(dev, "compute", 2.0)
        t0 = time.perf_counter()
        del link
        gc.collect()
        again = Link(dev, dev, packet_size=4, num_buffers=2, ctx=ctx, initiated="device",
                     receiver=receiver)
        assert time.perf_counter() - t0 < 1.0
        again.close()
        dev.compute_stream.synchronize()
