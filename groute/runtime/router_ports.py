"""What a Router joins: its input and output endpoints and its policy, checked; and its input
ports as ``router.inputs`` hands them out (:class:`InputPorts`).

A :class:`~groute.runtime.router.Router` in one process (links between the devices) and a
:class:`~groute.runtime.rank_router.RankRouter` across processes (MPI) take the same arguments
and check them the same way; this module is where both do, since the Router makes the
RankRouter and so the RankRouter cannot import the Router's module.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..ints import is_int
from .endpoint import Endpoint


def router_ports(inputs, outputs, policy) -> tuple[list[Endpoint], list[Endpoint]]:
    """A Router's input and output endpoints, its ``policy`` checked to be a function.

    Parameters
    ----------
    inputs, outputs : sequence
        What the Router joins: devices, endpoints or ``"host"`` (:meth:`Endpoint.of`).
    policy : callable
        ``policy(segment, source, destinations)`` (:mod:`groute.runtime.policies`).

    Returns
    -------
    tuple of list of Endpoint
        ``(input_endpoints, output_endpoints)``.

    Raises
    ------
    TypeError
        ``policy`` not callable, or something that is not an endpoint.
    ValueError
        No input or no output.

    Examples
    --------
    >>> from groute.runtime.policies import broadcast
    >>> from groute.runtime.router_ports import router_ports
    >>> ins, outs = router_ports(["host"], ["host"], broadcast)
    >>> ins[0].is_host, len(outs)
    (True, 1)
    """
    if not callable(policy):
        raise TypeError(f"policy must be a function (segment, source, destinations) -> list, "
                        f"got {policy!r}")
    input_endpoints = [Endpoint.of(x) for x in _listed("inputs", inputs)]
    output_endpoints = [Endpoint.of(x) for x in _listed("outputs", outputs)]
    if not input_endpoints or not output_endpoints:
        raise ValueError("a Router needs at least one input and one output")
    return input_endpoints, output_endpoints


def _listed(what: str, given) -> list:
    """A router's ``inputs`` or ``outputs`` as a list, or a TypeError naming ``what``: one
    endpoint given alone (``"host"``, a device) is a slip that iterating would misread."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        raise TypeError(f"{what} is a list of devices, endpoints or 'host', got {given!r}; "
                        f"one alone goes in a list: [{given!r}]")
    return list(given)


class InputPorts(Sequence):
    """``router.inputs``: a router's input ports, each made when asked for. A router that
    held its ports, each holding it, would be a cycle that keeps the links' receive buffers
    until Python's garbage collector runs; so ``router.inputs[i]`` is a new port each time."""

    def __init__(self, router, port):
        self._router = router
        self._port = port

    def __len__(self):
        return len(self._router.input_endpoints)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        n = len(self)
        if not is_int(i):
            raise TypeError(f"{self._router.name}'s inputs are indexed by an int or a slice, "
                            f"got {i!r}")
        if not -n <= i < n:
            raise IndexError(f"{self._router.name} has {n} inputs; no input {i}")
        return self._port(self._router, i % n)
