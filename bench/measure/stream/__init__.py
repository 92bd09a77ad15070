"""One streamed request: the SSE parser (:mod:`.sse`: events with a monotonic timestamp each)
and the OpenAI-compatible client (:mod:`.client`: the endpoint, the model, a streamed chat over
aiohttp, the resend past a closed pooled connection). Built on :mod:`bench.measure.metrics`'s
request record; knows nothing of runs or levels.
"""
