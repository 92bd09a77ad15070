"""The measuring harness behind ``bench run``: requests, workloads, metrics, results, reports.

Where the run goes (:mod:`~bench.measure.config`), the streaming client
(:mod:`~bench.measure.client`), the synthetic prompts (:mod:`~bench.measure.prompts`), the
workloads, one class each in a registry (:mod:`~bench.measure.workloads`), the options a run is
given (:mod:`~bench.measure.options`), the loops that drive a level
(:mod:`~bench.measure.loops`), the run itself (:mod:`~bench.measure.benchmark`), the pure
metrics (:mod:`~bench.measure.metrics`), the server's ``/metrics``
(:mod:`~bench.measure.server`), GPU telemetry (:mod:`~bench.measure.gpu`), Ollama's native API
(:mod:`~bench.measure.ollama`), a level's result (:mod:`~bench.measure.levels`), the result types
and files (:mod:`~bench.measure.results`, serialised by :mod:`~bench.measure.codec`, with the
JSON Schema of :mod:`~bench.measure.schema`), the terminal report
(:mod:`~bench.measure.report`), and the capability probe: its result files
(:mod:`~bench.measure.probes`), what a deployment expects (:mod:`~bench.measure.probe_expect`),
its request (:mod:`~bench.measure.probe_http`) and its checks (:mod:`~bench.measure.probe_checks`,
:mod:`~bench.measure.probe_tools`).

It takes from the rig core (:mod:`bench.rig`) only the names that package exports, and raises
the exceptions of :mod:`bench.errors`, which stays at the top of the package because the core,
the harness and the CLI share it. The Ansible side never imports this package.
"""
