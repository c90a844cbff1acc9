"""Every app's rules by name (what the help prints).

The machinery (:class:`~groute.engines.rules.Rule`, :class:`~groute.engines.rules.Case`, the
library's facts) is :mod:`groute.engines.rules`; BFS and SSSP decide by the relaxation engines'
rules (:mod:`groute.engines.relax.rules`), unit-step and weighted, PageRank and Katz by the
linear iteration engines' (:mod:`groute.engines.iterate.rules`), CC by the connected components
engine's (:mod:`groute.engines.components.rules`).

This module is data: it imports no app, so every app (and a test) may read it.
"""
from __future__ import annotations

from groute.engines import rules
from groute.engines.components.rules import COMPONENTS_RULES
from groute.engines.iterate.rules import FACTS as ITERATE_FACTS
from groute.engines.iterate.rules import ITERATE_RULES
from groute.engines.relax.rules import UNIT_STEP_RULES, WEIGHTED_RULES
from groute.engines.rules import Case, Rule  # noqa: F401  (re-exported for the rules' readers)

#: the library's facts and the linear iteration engines' (PageRank's and Katz's rules)
FACTS = ITERATE_FACTS


def said(when) -> str:
    """The facts of a case in words, this module's facts among them."""
    return rules.said(when, FACTS)


#: BFS's and SSSP's: the relaxation engines' unit-step and weighted rules (the same objects)
BFS_RULES = UNIT_STEP_RULES
SSSP_RULES = WEIGHTED_RULES

#: PageRank's and Katz's: the linear iteration engines' rules (the same object)
PR_RULES = KATZ_RULES = ITERATE_RULES

#: CC's: the connected components engine's rules (the same object)
CC_RULES = COMPONENTS_RULES

#: every app's rules, by the app's name
RULES = {"bfs": BFS_RULES, "sssp": SSSP_RULES, "pr": PR_RULES, "katz": KATZ_RULES,
         "cc": CC_RULES}
