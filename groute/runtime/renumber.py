"""An answer split across devices by new ids, put back into the graph's order on the devices.

Why: a partition that renumbers the vertices (METIS, the default's choice on several devices for
graphs of up to 8M arcs; the random split; PageRank's degree order cut by cost) leaves each device with the values of a
range of *new* ids, which are scattered over the graph's ids. Undone on the host, that is a
gather over every vertex into fresh memory after the download: tens of milliseconds on a graph
of tens of millions of vertices, more than the run on several GPUs. Undone on the devices, it
is a gather through peer memory, and each device makes a contiguous slice of the answer in the
graph's order, which :func:`~groute.runtime.answer_landing.land_answer` lands at its offset with
no host pass at all.

Device ``j`` makes the graph's ids ``[bounds[j], bounds[j + 1])`` (an even split): for each, its
new id ``index[x]``, read from the part of the device whose new-id range holds it. On CUDA one
kernel per device (``renumber.cu``) reads the other devices' parts through peer memory, after
their compute streams have finished them (an event of each, waited for on the gathering
device's compute stream); on CPU virtual devices the same gather runs in NumPy on each device's
thread (their parts are host arrays). Where a device cannot reach every other's memory, or the
devices are several processes', the answer is brought whole by new ids first and
:class:`WholeAnswerRenumbering` puts it in order on one device of this process instead
(:func:`gather_on_devices` says which).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from groute.runtime.answer_exchange import FREE_SHARE

#: the kernels, one per index width and value size
KERNEL = Path(__file__).with_name("renumber.cu")
#: the most devices the kernel takes parts from (its pointer arguments)
MAX_PARTS = 8
#: threads per block of the gather
BLOCK = 256


#: the value sizes the kernel copies (bytes)
ITEM_SIZES = (4, 8)


def gather_on_devices(ctx, dtype) -> bool:
    """Whether :class:`DeviceRenumbering` can put an answer of ``dtype`` back in order on
    ``ctx``: values of 4 or 8 bytes (:data:`ITEM_SIZES`), on CPU virtual devices or on at most
    :data:`MAX_PARTS` CUDA devices of this process that each reach every other's memory."""
    if getattr(ctx, "ranks", None) is not None or np.dtype(dtype).itemsize not in ITEM_SIZES:
        return False
    devs = ctx.devices
    if len(devs) > MAX_PARTS:
        return False
    return ctx.backend != "cuda" or all(a.can_access_peer(b)
                                        for a in devs for b in devs if a is not b)


class DeviceRenumbering:
    """Gathers an answer held by new ids (one part per device of ``ctx``, device ``i`` holding
    new ids ``[offsets[i], offsets[i + 1])``) into the graph's order, each device making its
    slice (module docstring).

    Parameters
    ----------
    ctx : Context
        The devices, at most :data:`MAX_PARTS` (where :func:`gather_on_devices` holds).
    index : array of int
        For each of the graph's ids, its new id (a permutation of ``range(n)``).
    offsets : array of int
        The devices' new-id ranges, ``len(ctx.devices) + 1`` of them, from 0 to n.
    """

    def __init__(self, ctx, index, offsets):
        index = np.asarray(index)
        self.ctx = ctx
        self.n = int(index.shape[0])
        self.offsets = np.asarray(offsets, dtype=np.int64)
        k = len(ctx.devices)
        if k > MAX_PARTS:
            raise ValueError(f"renumbering: {k} devices; the gather reads at most {MAX_PARTS}")
        if self.offsets.shape != (k + 1,) or self.offsets[0] != 0 or self.offsets[-1] != self.n:
            raise ValueError(f"renumbering: offsets {self.offsets.tolist()} do not split "
                             f"{self.n} new ids over {k} devices")
        self.bounds = np.linspace(0, self.n, k + 1).astype(np.int64)
        wide = self.n > np.iinfo(np.int32).max
        self.index_dtype = np.int64 if wide else np.int32
        self._index, self._offsets = [], []
        for dev, lo, hi in zip(ctx.devices, self.bounds[:-1], self.bounds[1:]):
            self._index.append(dev.asarray(index[lo:hi].astype(self.index_dtype)))
            self._offsets.append(dev.asarray(self.offsets))

    def gather(self, parts) -> list:
        """Each device's slice of the answer in the graph's order.

        Parameters
        ----------
        parts : list
            Per device, its values by new id: an array of that device, contiguous, made on
            its compute stream, one dtype of :data:`ITEM_SIZES` bytes for all; None for a
            device holding no new ids.

        Returns
        -------
        list
            Per device, an array of it holding the graph's ids ``[bounds[j], bounds[j + 1])``,
            made on its compute stream after every other device's stream reached the point
            where its part was finished; and every source device's stream waits for every
            gather that reads its part, so memory it frees afterwards is not written while
            another device still reads it. The same ordering on both backends.
        """
        devs = self.ctx.devices
        if len(parts) != len(devs):
            raise ValueError(f"renumbering: {len(parts)} parts for {len(devs)} devices")
        held = [p for p in parts if p is not None]
        if not held:
            raise ValueError("renumbering: no device holds a part")
        dtype = held[0].dtype
        if dtype.itemsize not in ITEM_SIZES:
            raise TypeError(f"renumbering: values of {dtype.itemsize} bytes "
                            f"({' or '.join(map(str, ITEM_SIZES))} only)")
        for i, (part, lo, hi) in enumerate(zip(parts, self.offsets[:-1], self.offsets[1:])):
            size = 0 if part is None else int(part.shape[0])
            if size != hi - lo or (part is not None and part.dtype != dtype):
                raise ValueError(f"renumbering: device {i}'s part is {size} x "
                                 f"{None if part is None else part.dtype}, its new ids "
                                 f"{hi - lo} x {dtype}")
        finished = [dev.compute_stream.record() for dev in devs]
        out, launched = [], []
        try:
            for j, dev in enumerate(devs):
                stream = dev.compute_stream
                for i, event in enumerate(finished):
                    if i != j:
                        stream.wait_event(event)
                slice_j = dev.empty(int(self.bounds[j + 1] - self.bounds[j]), dtype)
                gather = self._gather_cuda if dev.backend == "cuda" else self._gather_numpy
                stream.submit(gather, j, parts, slice_j)
                launched.append(j)
                out.append(slice_j)
        finally:
            read = [devs[j].compute_stream.record() for j in launched]
            for i, dev in enumerate(devs):
                if parts[i] is not None:
                    for j, event in zip(launched, read):
                        if j != i:
                            dev.compute_stream.wait_event(event)
        return out

    def _gather_cuda(self, j, parts, out) -> None:
        """Device ``j``'s gather: one kernel on its compute stream (current here)."""
        from groute.kernels import get_kernel
        count = int(out.shape[0])
        if not count:
            return
        dev = self.ctx.devices[j]
        name = (f"groute_gather_parts_i{8 * np.dtype(self.index_dtype).itemsize}"
                f"_w{out.dtype.itemsize}")
        addresses = [0 if p is None else int(p.data.ptr) for p in parts]
        addresses += [0] * (MAX_PARTS - len(addresses))
        blocks = min(-(-count // BLOCK), 32 * dev.multiprocessors)
        get_kernel(KERNEL, name)((blocks,), (BLOCK,),
                                 (self._index[j], np.int64(count), self._offsets[j],
                                  np.int32(len(parts)), *(np.uint64(a) for a in addresses), out))

    def _gather_numpy(self, j, parts, out) -> None:
        """Device ``j``'s gather in NumPy, on its thread: ``out[x]`` is the value of new id
        ``index[x]``."""
        index, offsets = self._index[j], self.offsets
        owner = np.searchsorted(offsets, index, side="right") - 1
        for i, part in enumerate(parts):
            mine = np.flatnonzero(owner == i)
            if mine.size:
                out[mine] = part[index[mine] - offsets[i]]


class WholeAnswerRenumbering:
    """An answer held whole by new ids, put into the graph's order on one device of this
    process: gathered there by an index kept on it. For the answers :class:`DeviceRenumbering`
    cannot gather part by part (:func:`gather_on_devices`): the devices are several
    processes' (each rank gathers the whole answer it got from the others,
    :func:`~groute.runtime.answer_landing.land_answer`), or cannot reach each other's memory
    (the answer landed on the host goes up to the device and back: :meth:`apply`).

    Why not on the host: a gather over every vertex by a scattered index runs at the host's
    random-access speed, several times slower than a gather in the device's memory and two
    copies over its link, and every rank would pay it.

    Parameters
    ----------
    ctx : Context
        The answer's context (its ``answer_landing`` provides the host array of :meth:`apply`).
    device : Device
        One of this process's devices: it holds the index and gathers.
    index : array of int
        For each of the graph's ids, its new id (a permutation of ``range(n)``).
    """

    def __init__(self, ctx, device, index):
        index = np.asarray(index)
        self.ctx, self.device = ctx, device
        self.n = int(index.shape[0])
        self._host_index = index        # for an answer the device cannot hold twice
        wide = self.n > np.iinfo(np.int32).max
        self._index = device.asarray(index.astype(np.int64 if wide else np.int32))

    def on_device(self, values):
        """The whole answer in the graph's order, on :attr:`device`.

        Parameters
        ----------
        values : array of the device
            By new id, one row per vertex.

        Returns
        -------
        array of the device
            By the graph's id: a new array, made on the device's compute stream.
        """
        if values.shape[0] != self.n:
            raise ValueError(f"renumbering: {values.shape[0]} values for {self.n} vertices")
        with self.device.on_compute():
            return values[self._index]

    def apply(self, values: np.ndarray) -> np.ndarray:
        """The whole answer, landed on the host, in the graph's order.

        Parameters
        ----------
        values : numpy.ndarray
            By new id, one row per vertex (an answer just landed: it is overwritten).

        Returns
        -------
        numpy.ndarray
            By the graph's id: ``values`` itself, uploaded, gathered on the device
            (:meth:`on_device`) and copied back into it (the upload is waited for first, and
            no second host array is taken from the context's landing). Where the device cannot
            hold the answer twice within a quarter of its free memory, a new array gathered
            on the host.
        """
        if values.shape[0] != self.n:
            raise ValueError(f"renumbering: {values.shape[0]} values for {self.n} vertices")
        if 2 * values.nbytes > self.device.memory_info()[0] // FREE_SHARE:
            return values[self._host_index]
        by_id = self.on_device(self.device.asarray(values))
        self.ctx.answer_landing.fill(values, [(self.device, by_id)], self.ctx.timeout)
        return values
