"""What a Router joins: its input and output endpoints and its policy, checked.

A :class:`~groute.runtime.router.Router` in one process (links between the devices) and a
:class:`~groute.runtime.rank_router.RankRouter` across processes (MPI) take the same arguments
and check them the same way; this module is where both do, since the Router makes the
RankRouter and so the RankRouter cannot import the Router's module.
"""
from __future__ import annotations

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
    input_endpoints = [Endpoint.of(x) for x in inputs]
    output_endpoints = [Endpoint.of(x) for x in outputs]
    if not input_endpoints or not output_endpoints:
        raise ValueError("a Router needs at least one input and one output")
    return input_endpoints, output_endpoints
