"""llmrig's bench package: the rig core, the measuring harness, and the command line over both.

- :mod:`bench.rig`: configuration rules, model presets, vLLM flags, start-up facts and the KV
  planner; the Ansible plugins under ``ansible/plugins`` import it on the controller, so
  importing it must stay cheap (standard library and PyYAML, which Ansible itself needs).
- :mod:`bench.measure`: the harness behind ``bench run``.
- :mod:`bench.cli`: the ``bench`` command (``python -m bench`` runs it too).
- :mod:`bench.errors`: the one exception tree, shared by all three, so it sits here at the top.
"""

__version__ = "0.1.0"
