"""The one test of "an integer" that every layer's argument checks share.

An ``int`` or a NumPy integer counts; a bool does not (Python says ``True`` is ``1``, but
``devices=True``, a vertex id ``True`` or a packet tag ``True`` is a slip, not a number), nor
does a float of a whole value. Kept apart from :mod:`groute.graph` and :mod:`groute.runtime`
so that either imports it without loading the other.
"""
from __future__ import annotations

import numpy as np


def is_int(x) -> bool:
    """Whether ``x`` is an int (NumPy's too) and not a bool.

    Parameters
    ----------
    x : object
        The value checked.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> from groute.ints import is_int
    >>> is_int(3), is_int(np.uint64(3)), is_int(True), is_int(3.0)
    (True, True, False, False)
    """
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
