"""The ``bench`` command line, on top of both halves of the package.

:mod:`.main` parses the arguments, answers ``bench presets`` itself and dispatches every other
command to the module named after it (``bench run`` to :mod:`.run`, ``bench tags``, ``compare``
and ``history`` to :mod:`.compare`, and so on), each of which turns its flags into the typed
options of the harness (:mod:`bench.measure`) or the rig core (:mod:`bench.rig`). :mod:`.target`
holds the flags every measuring command shares (endpoint, key, tag, results folder);
:mod:`.schemas` writes and checks the committed JSON Schemas. Nothing in :mod:`bench.rig` or
:mod:`bench.measure` imports this package (the import-linter contracts in pyproject.toml).
"""

from bench.cli.main import main

__all__ = ["main"]
