"""The measuring harness behind ``bench run``: requests, workloads, metrics, results, reports.

Where the run goes (:mod:`~bench.measure.config`), the streaming client
(:mod:`~bench.measure.client`), the workloads and their runner (:mod:`~bench.measure.workloads`,
:mod:`~bench.measure.runner`, :mod:`~bench.measure.run`, :mod:`~bench.measure.options`), the
pure metrics (:mod:`~bench.measure.metrics`), the server's ``/metrics``
(:mod:`~bench.measure.server`), GPU telemetry (:mod:`~bench.measure.gpu`), Ollama's native API
(:mod:`~bench.measure.ollama`), the result files (:mod:`~bench.measure.results`) and the terminal
report (:mod:`~bench.measure.report`).

It takes from the rig core (:mod:`bench.rig`) only the names that package exports, and raises
the exceptions of :mod:`bench.errors`, which stays at the top of the package because the core,
the harness and the CLI share it. The Ansible side never imports this package.
"""
