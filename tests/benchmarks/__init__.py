"""Benchmarks, not tests: programs that print figures (scripts/bench-peers, scripts/bench-speed run
them). :mod:`.peers` puts bench beside AIPerf and GuideLLM against one llama.cpp server, with each
tool's CPU per streamed token from :mod:`.peer_cost`; :mod:`.speed` times ``bench compare`` and
``bench report`` over synthetic result files. They are type-checked with bench (mypy strict) and
their arithmetic is tested in tests/unit/benchmarks/."""
