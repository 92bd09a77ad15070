"""The ``bench`` command line, on top of both halves of the package.

``main`` parses the arguments and dispatches: ``bench presets`` here, ``bench run`` to
:mod:`bench.cli.run` (the measuring harness, :mod:`bench.measure`) and ``bench plan`` to
:mod:`bench.cli.plan` (the KV planner of the rig core, :mod:`bench.rig`, with the deployment
found the way ``bench run`` finds it). Nothing in :mod:`bench.rig` or :mod:`bench.measure`
imports this package (the import-linter contracts in pyproject.toml, run by scripts/lint).
"""

from bench.cli.main import main

__all__ = ["main"]
