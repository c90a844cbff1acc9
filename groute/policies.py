"""Routing policies: given a segment, where may it go?

A policy is a plain function ``policy(segment, source, destinations) -> allowed``, where
``source`` is the router input index, ``destinations`` the router's output indices, and
``allowed`` either a list of output indices (the router sends to the first of them that has
room: availability, i.e. load balancing) or a :class:`Route` with an explicit strategy.
"""
from __future__ import annotations

from dataclasses import dataclass

AVAILABILITY = "availability"   # first allowed destination with a free receive buffer
FIXED = "fixed"                 # exactly the first allowed destination (queue if it is busy)
BROADCAST = "broadcast"         # every allowed destination


@dataclass(frozen=True)
class Route:
    destinations: tuple
    strategy: str = AVAILABILITY

    def __post_init__(self):
        if self.strategy not in (AVAILABILITY, FIXED, BROADCAST):
            raise ValueError(f"unknown route strategy {self.strategy!r}")


def as_route(result) -> Route:
    if isinstance(result, Route):
        return result
    if isinstance(result, int):
        return Route((result,), FIXED)
    return Route(tuple(int(d) for d in result), AVAILABILITY)


def broadcast(segment, source, destinations):
    """Every destination gets a copy."""
    return Route(tuple(destinations), BROADCAST)


def first_available(segment, source, destinations):
    """Whichever destination frees a buffer first (load balancing by availability)."""
    return list(destinations)


def by_key(key: str = "owner"):
    """Route to the destination named by ``segment.metadata[key]``."""
    def policy(segment, source, destinations):
        try:
            dest = int(segment.metadata[key])
        except KeyError:
            raise ValueError(f"by_key policy: segment metadata has no {key!r}") from None
        if dest not in destinations:
            raise ValueError(f"by_key policy: destination {dest} is not one of {list(destinations)}")
        return Route((dest,), FIXED)
    policy.__name__ = f"by_key({key!r})"
    return policy


by_owner = by_key("owner")


def ring(segment, source, destinations):
    """To the next destination after the source (device i sends to i+1, the last to the first)."""
    n = len(destinations)
    return Route((destinations[(source + 1) % n],), FIXED)


POLICIES = {"broadcast": broadcast, "first_available": first_available, "by_owner": by_owner,
            "ring": ring}
