"""``groute.apps`` and ``groute.topology`` when groute runs from a source checkout.

The repository keeps the algorithms (``apps/``) and the topology tools (``topology/``) at its top
level, beside the ``groute/`` package. An install maps them into the package (``package-dir`` in
``pyproject.toml``): an installed groute has ``groute/apps/`` and ``groute/topology/``, and
setuptools' editable install resolves the same names to the checkout's folders. A checkout used
without installing (``PYTHONPATH`` pointing at it, as on a machine where nothing may be
installed) has no ``groute/apps/``; :func:`add_checkout_finder` then appends a finder to
``sys.meta_path`` that resolves exactly those two names to the top-level folders (their modules
follow through the subpackage's ``__path__``). Appended last, it answers only what no installed
copy or editable finder did, and it is added only when the folders sit next to ``groute/`` in a
tree with a ``pyproject.toml``, so an installed groute never gets it.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

#: groute's subpackages that live at the top of the repository, under the same folder names.
TOP_LEVEL_SUBPACKAGES = ("apps", "topology")


class CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``groute.<name>`` for each ``name`` of :data:`TOP_LEVEL_SUBPACKAGES` in ``root``."""

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent != "groute" or name not in TOP_LEVEL_SUBPACKAGES:
            return None
        # PathFinder looks the last part of the name up in the folders given: root/<name>/
        return importlib.machinery.PathFinder.find_spec(fullname, [str(self.root)])


def add_checkout_finder(package_dir: Path | None = None) -> bool:
    """Append a :class:`CheckoutFinder` when ``package_dir`` (the ``groute/`` folder, this
    module's own by default) is in a source checkout whose top-level subpackage folders are not
    inside it; True when one is (or already was) in place."""
    package_dir = package_dir or Path(__file__).resolve().parent
    root = package_dir.parent
    if not (root / "pyproject.toml").is_file():
        return False
    if not all((root / name / "__init__.py").is_file() and not (package_dir / name).exists()
               for name in TOP_LEVEL_SUBPACKAGES):
        return False
    if any(type(f).__name__ == CheckoutFinder.__name__ and getattr(f, "root", None) == root
           for f in sys.meta_path):            # the package imported again (importlib.reload)
        return True
    sys.meta_path.append(CheckoutFinder(root))
    return True
