"""groute as a NetworkX backend: ``nx.pagerank(G, backend="groute")``.

NetworkX (3.2+) finds the backend through two entry points (``pyproject.toml``):
``networkx.backends`` names :data:`.interface.backend_interface`, the object whose attributes
are the implemented algorithms plus the conversions and the ``can_run`` rule;
``networkx.backend_info`` names :func:`.info.get_info`, which NetworkX calls while it is being
imported and therefore imports nothing heavy.

* :mod:`.info`: the implemented functions (one list) and ``nx.config.backends.groute``;
* :mod:`.graph`: :class:`~.graph.GrouteGraph`, a converted graph (groute's CSR, the node
  labels, NetworkX's adjacency order), and the conversions both ways;
* :mod:`.devices`: one groute Context per configuration, reused across calls;
* :mod:`.algorithms`: the implementations, one module per NetworkX family, and, per function,
  when groute can honour the call;
* :mod:`.interface`: what NetworkX loads;
* :mod:`.refusal`: a call groute declines, logged, and an error where falling back is off;
* :mod:`.registration`: the entry points' registration, by hand, for a checkout not installed;
* :mod:`.suite`: NetworkX's own tests run through the backend, counted.

docs/NETWORKX.md says what is implemented, how to configure it and its limits.
"""
