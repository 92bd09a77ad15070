"""Run llama.cpp's own HTTP server (embedded in the xllamacpp wheel) until SIGTERM.

    python xllamacpp_server.py MODEL.gguf PORT API_KEY

llama.cpp serves /health, /metrics (llamacpp:*), /props, /slots and the OpenAI /v1 routes with
include_usage. Two slots of 2048 tokens, one thread (the tests pin the server to one core).
The gemma3-270m GGUF has no chat template; ChatML is the one llmrig's vLLM role uses too.
"""

from __future__ import annotations

import signal
import sys

import xllamacpp


def main() -> None:
    model, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.port = port
    if key:  # an empty key serves without authentication
        params.api_keys = [key]
    params.endpoint_metrics = True
    params.n_parallel = 2
    params.n_ctx = 4096
    params.cpuparams.n_threads = 1
    params.chat_template = "chatml"
    server = xllamacpp.Server(params)
    print("listening", server.listening_address, flush=True)
    signal.sigwait([signal.SIGTERM, signal.SIGINT])


if __name__ == "__main__":
    main()
