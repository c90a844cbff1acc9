"""What ``make_engine(graph, "auto")`` builds: :data:`ENGINE_RULE`, read by
:func:`groute.engines.make_engine` and by the commands' help.

An engine is built before the algorithm runs on it, so the rule cannot ask what the algorithm
does; it asks only how many devices there are. Whether a loop runs asynchronously is decided
per loop inside the async engine (:data:`groute.engines.ASYNC_LOOP_RULE`), where the loop's own
declaration (``order="any"``) is known; every other loop and operator runs there as on the BSP
engine, so choosing it costs a level-synchronous algorithm nothing.
"""
from __future__ import annotations

from .device_rule import choose_devices
from .rules import Case, Rule

#: what ``make_engine``'s ``engine`` takes
ENGINE_CHOICES = ("bsp", "async", "auto")
#: what ``engine="auto"`` builds: the first case whose facts hold
ENGINE_RULE = Rule("engine", (
    Case(("one_device",), "bsp", "one device has no exchange to overlap with its work"),
    Case(("processes",), "bsp", "between processes the operators exchange level by level "
                                "(the async engine's loops need items in flight between devices)"),
    Case((), "async", "the BSP engine's operators and level loops, and every loop declared "
                      "order='any' run without levels where the async loop rule allows"),
))


def device_count(graph, options: dict) -> int:
    """How many devices an engine over ``graph`` built with ``options`` (``ctx``, ``devices``,
    ``backend``) will have, as the engine resolves them
    (:func:`groute.engines.device_rule.choose_devices`)."""
    ctx = options.get("ctx")
    if ctx is not None:
        return ctx.num_devices
    devices = choose_devices(options.get("devices", "auto"), backend=options.get("backend", "auto"),
                             engine="operators", num_vertices=graph.num_vertices,
                             num_arcs=graph.num_edges, directed=graph.directed).devices
    return devices if isinstance(devices, int) else len(devices)


def choose_engine(graph, options: dict) -> Case:
    """The case of :data:`ENGINE_RULE` for an engine over ``graph`` with ``options``."""
    return ENGINE_RULE.decide({
        "one_device": lambda: device_count(graph, options) == 1,
        "processes": lambda: getattr(options.get("ctx"), "ranks", None) is not None})


def engine_rule_help() -> str:
    """:data:`ENGINE_RULE` in words: what ``mode="auto"`` builds, as a command's help for
    ``--mode`` prints it.

    Returns
    -------
    str
        The rule's cases, in order, and why each.

    Examples
    --------
    >>> from groute.engines import engine_rule_help
    >>> engine_rule_help().startswith("the first that applies: bsp where one device")
    True
    """
    return ENGINE_RULE.help()
