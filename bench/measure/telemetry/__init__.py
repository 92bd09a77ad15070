"""What is measured beside the requests: the server's Prometheus ``/metrics`` (:mod:`.server`,
with the report types a result file holds in :mod:`.server_types`), GPU telemetry through NVML
(:mod:`.gpu`), and Ollama's own timings as a cross-check (:mod:`.ollama`).
"""
