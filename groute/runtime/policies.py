"""Routing policies: given a segment, where may it go?

A policy is a plain function ``policy(segment, source, destinations) -> allowed``, where
``source`` is the router input index, ``destinations`` the router's output indices, and
``allowed`` either a list of output indices (the router sends to the first of them that has
room: availability, i.e. load balancing) or a :class:`Route` with an explicit strategy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ints import is_int

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


def _destination(d, policy: str) -> int:
    # bool is an int to Python, but True as "output 1" is a bug, not a choice
    if not is_int(d):
        raise TypeError(f"{policy} chose {d!r} ({type(d).__name__}) as a destination; "
                        f"destinations are output indices (int)")
    return int(d)


def _indices(destinations, policy: str, result):
    """``destinations`` (a list, tuple, range or 1-D array) as a sequence, or a TypeError
    naming ``policy`` and what it returned (``result``)."""
    if isinstance(destinations, (list, tuple, range)) or (
            isinstance(destinations, np.ndarray) and destinations.ndim == 1):
        return destinations
    raise TypeError(f"{policy} returned {result!r}; a policy's destinations are output indices "
                    f"in a list, tuple, range or 1-D array, got {type(destinations).__name__}"
                    + (f" of {destinations.ndim} dimensions" if isinstance(destinations,
                                                                        np.ndarray) else ""))


def as_route(result, policy: str = "a routing policy") -> Route:
    """The :class:`Route` a policy's answer means: one output index (NumPy integers too) is
    FIXED, a list, tuple, range or array of them is AVAILABILITY, a Route stays. Anything else
    (None, a float, a bool, a string) is a TypeError naming ``policy`` (the router and its
    policy function), since guessing would send segments where nobody asked; a broadcast
    that names an output twice is a ValueError (it would deliver the segment twice)."""
    if isinstance(result, np.ndarray) and result.ndim == 0:
        result = result[()]     # a NumPy scalar as an array: one output index, or refused below
    if isinstance(result, Route):
        destinations = tuple(_destination(d, policy) for d in _indices(result.destinations,
                                                                       policy, result))
        if result.strategy == BROADCAST and len(set(destinations)) < len(destinations):
            twice = sorted({d for d in destinations if destinations.count(d) > 1})
            raise ValueError(f"{policy} broadcast to output {twice[0]} more than once "
                             f"({list(destinations)}); a broadcast names each output once")
        return Route(destinations, result.strategy)
    if is_int(result):
        return Route((int(result),), FIXED)
    if isinstance(result, (list, tuple, range, np.ndarray)):
        return Route(tuple(_destination(d, policy) for d in _indices(result, policy, result)),
                     AVAILABILITY)
    raise TypeError(f"{policy} returned {result!r} ({type(result).__name__}); a policy returns "
                    f"an output index, a list of them, or a Route")


def broadcast(segment, source, destinations):
    """Every destination gets a copy."""
    return Route(tuple(destinations), BROADCAST)


def to_the_others(segment, source, destinations):
    """Every destination but the sender's own (a frontier or a slice every other device needs)."""
    return Route(tuple(d for d in destinations if d != source), BROADCAST)


broadcast.broadcasts = True
to_the_others.broadcasts = True
broadcast.by_source = True
to_the_others.by_source = True


def broadcasts(policy) -> bool:
    """True for a policy whose every answer is a broadcast, as it says in a ``broadcasts``
    attribute (:func:`broadcast`, :func:`to_the_others`): a router gives the links of each of its
    inputs one copy stream, so that a broadcast's copies go out one after another with one
    event (:func:`groute.runtime.link.send_all`). Any policy may still answer with a
    broadcast Route; without the attribute its copies go on each link's own stream."""
    return bool(getattr(policy, "broadcasts", False))


def by_source(policy) -> bool:
    """True for a policy whose answer depends on the source alone, never on the segment, as
    it says in a ``by_source`` attribute (:func:`broadcast`, :func:`to_the_others`,
    :func:`ring`, :func:`first_available`): a router asks it once per input and keeps the
    route, which takes the policy call and the route's checks off every later send. The flag is
    trusted: a policy that reads the segment must not carry it, and ``functools.wraps`` copies
    it (with ``broadcasts``) from a wrapped built-in, so a wrapper that decides per segment
    sets ``policy.by_source = False``."""
    return bool(getattr(policy, "by_source", False))


def first_available(segment, source, destinations):
    """Whichever destination frees a buffer first (load balancing by availability)."""
    return list(destinations)


first_available.by_source = True


def by_key(key: str = "owner"):
    """Route to the destination named by ``segment.metadata[key]``."""
    def policy(segment, source, destinations):
        try:
            value = segment.metadata[key]
        except KeyError:
            raise ValueError(f"by_key policy: segment metadata has no {key!r}") from None
        # an output index as it is: 1.7 or True as output 1 would send the segment where
        # nobody asked (as_route refuses them from any policy)
        dest = _destination(value, f"by_key policy, metadata {key!r}")
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


ring.reach = lambda source, destinations: (destinations[(source + 1) % len(destinations)],)
ring.by_source = True


def reach(policy, source, destinations) -> tuple:
    """The destinations ``policy`` may ever choose for input ``source``: what a router needs
    links to (:class:`~groute.runtime.router.Router`'s ``pairs``). A policy that decides per segment
    reaches every destination; one whose answer depends only on the source (``ring``) says so
    in a ``reach`` attribute."""
    own = getattr(policy, "reach", None)
    return tuple(own(source, destinations)) if own is not None else tuple(destinations)


POLICIES = {"broadcast": broadcast, "first_available": first_available, "by_owner": by_owner,
            "ring": ring, "to_the_others": to_the_others}
