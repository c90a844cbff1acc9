"""What ``groute bench`` needs to check and compare the apps written on the operator API: a CPU
reference, the peers a user would run instead, and a floor model, one module per app. The
bench specs name these functions (:mod:`groute.bench.specs`: ``reference``, ``peers``, ``floor``);
the harness calls them without knowing which app they belong to.

They are written independently of the apps (NumPy/scipy, as ``groute.graph.reference``), so a
case checked against them is checked against code that shares nothing with the kernels.
"""
