"""llmrig's bench package: configuration rules, model presets and (later) the benchmark harness.

Importing this package must stay cheap and dependency-free: the Ansible plugins under
``ansible/plugins`` import it on the controller to share one implementation of the rules.
"""

__version__ = "0.1.0"
