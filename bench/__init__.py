"""llmrig's bench package: configuration rules, model presets, the KV planner and the benchmark harness.

Importing ``bench.validation`` must stay cheap (standard library and PyYAML, which Ansible
itself needs): the Ansible plugins under ``ansible/plugins`` import it on the controller to
share one implementation of the rules.
"""

__version__ = "0.1.0"
