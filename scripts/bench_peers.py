"""Benchmark script (not a test): bench side by side with AIPerf and GuideLLM, and bench's own cost.

1. One llama.cpp server (xllamacpp, gemma3-270m, one thread) pinned to core 1; each tool pinned
   to core 0 in turn sends the same workload (10 requests, one at a time, 64 prompt tokens,
   32 output tokens). The table gives each tool's TTFT and inter-token medians and their ratio
   to bench's: the tools should agree within a few percent when all of them measure honestly.
2. bench's own CPU cost per streamed token: bench against the scripted server (a local fake that
   streams as fast as it can), CPU seconds of the bench process over the tokens it received.

Run it with scripts/bench-peers, which builds what it needs under build/. Prints Markdown.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.measure import results

REPO = Path(__file__).resolve().parents[1]
RIG = REPO / "build" / "testrig"
PEERS = REPO / "build" / "peers"
BENCH = REPO / ".venv" / "bin" / "bench"
MODEL = RIG / "models" / "gemma-3-270m-q4_k_m.gguf"
TOKENIZER = RIG / "models" / "gemma3-270m-hf"
REQUESTS, ISL, OSL = 10, 64, 32


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_healthy(port: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"server on port {port} did not become healthy")


def pinned(core: int, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["taskset", "-c", str(core), *command], capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def run_bench(base_url: str, workdir: Path, extra: list[str] | None = None, isl: int = ISL) -> dict[str, Any]:
    results = workdir / "bench-results"
    command = [str(BENCH), "run", "single", "--base-url", base_url, "--tag", "peers", "--results-dir", str(results)]
    command += ["--requests", str(REQUESTS), "--input-tokens", str(isl), "--output-tokens", str(OSL), *(extra or [])]
    pinned(0, command)
    (path,) = (results / "peers").glob("*.json")
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def bench_medians(document: dict[str, Any]) -> tuple[float, float, float]:
    """TTFT p50, and TPOT p50: what AIPerf and GuideLLM call ITL, (E2E - TTFT) / (tokens - 1)."""
    level = document["levels"][0]
    return level["latency"]["ttft_ms"]["p50"], level["latency"]["tpot_ms"]["p50"], level["tokens"]["input"]["p50"]


def run_aiperf(port: int, model: str, workdir: Path) -> tuple[float, float, float]:
    artifacts = workdir / "aiperf"
    command = [
        str(PEERS / "aiperf" / "bin" / "aiperf"),
        "profile",
        "--model",
        model,
        "--url",
        f"http://127.0.0.1:{port}",
    ]
    command += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(TOKENIZER), "--isl", str(ISL)]
    command += ["--osl", str(OSL), "--request-count", str(REQUESTS), "--concurrency", "1"]
    command += ["--artifact-dir", str(artifacts), "--ui-type", "none"]
    pinned(0, command, stdin=subprocess.DEVNULL)
    (export,) = artifacts.rglob("profile_export_aiperf.json")
    data = json.loads(export.read_text(encoding="utf-8"))
    records = data.get("records", data)
    prompt = float(records["usage_prompt_tokens"]["p50"])  # as the server counted it, chat template included
    return float(records["time_to_first_token"]["p50"]), float(records["inter_token_latency"]["p50"]), prompt


def run_guidellm(port: int, model: str, workdir: Path) -> tuple[float, float, float]:
    output = workdir / "guidellm.json"
    command = [str(PEERS / "guidellm" / "bin" / "guidellm"), "run"]
    command += ["--backend", f"kind=openai_http,target=http://127.0.0.1:{port},model={model}"]
    command += ["--profile", "kind=synchronous", "--constraint", f"kind=max_requests,count={REQUESTS}"]
    command += ["--tokenizer", f"kind=hf_auto,model={TOKENIZER}"]
    command += ["--data", f"kind=synthetic_text,prompt_tokens={ISL},output_tokens={OSL}"]
    command += ["--output", f"kind=json,path={output}", "--disable-progress"]
    pinned(0, command, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    data = json.loads(output.read_text(encoding="utf-8"))
    metrics = data["benchmarks"][0]["metrics"]
    return (
        float(metrics["time_to_first_token_ms"]["successful"]["median"]),
        float(metrics["inter_token_latency_ms"]["successful"]["median"]),
        float(metrics["prompt_token_count"]["successful"]["median"]),
    )


def peers_table(workdir: Path) -> list[str]:
    port = free_port()
    launcher = REPO / "roles" / "llamacpp" / "files" / "llmrig-llama-server"  # what the llamacpp role runs
    command = ["taskset", "-c", "1", str(RIG / "llamacpp" / "bin" / "python"), str(launcher), "--model", str(MODEL)]
    command += ["--port", str(port), "--ctx-size", "4096", "--parallel", "2", "--threads", "1", "--metrics"]
    command += ["--chat-template", "chatml"]
    with (workdir / "llamacpp.log").open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=sink)
    try:
        wait_healthy(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
            model = json.loads(response.read())["data"][0]["id"]
        peers = [
            (name, runner(port, model, workdir))
            for name, runner in (("AIPerf 0.13.0", run_aiperf), ("GuideLLM 0.8.1", run_guidellm))
        ]
        # Both peers count --isl before the chat template; bench counts what the server counts.
        # Give bench the prompt length the server saw from the peers, so all three send the same.
        same = round(peers[0][1][2])
        ours = bench_medians(run_bench(f"http://127.0.0.1:{port}/v1", workdir, isl=same))
        rows = [("bench", ours), *peers]
    finally:
        server.terminate()
        server.wait(timeout=30)
    lines = [
        f"llama.cpp (xllamacpp) serving gemma3-270m on core 1; each tool on core 0; {REQUESTS} requests, "
        f"concurrency 1, --isl {ISL} for the peers, {OSL} output tokens. ITL here is (E2E - TTFT) / (tokens - 1) "
        "per request, which bench reports as TPOT.",
        "",
        "| tool | prompt tokens (server) | TTFT p50 ms | ITL p50 ms | TTFT / bench | ITL / bench |",
        "|---|---|---|---|---|---|",
    ]
    for name, (ttft, itl, prompt) in rows:
        lines.append(f"| {name} | {prompt:.0f} | {ttft:.1f} | {itl:.2f} | {ttft / ours[0]:.3f} | {itl / ours[1]:.3f} |")
    return lines


def cpu_cost(workdir: Path) -> list[str]:
    """bench's CPU per streamed token, against the scripted server streaming as fast as it can."""
    scenario = workdir / "fast.json"
    scenario.write_text(
        json.dumps({"api_key": "", "ttft_ms": 0, "itl_ms": 0, "content_tokens": 2000}), encoding="utf-8"
    )
    fake = REPO / "tests" / "fakes" / "scripted_openai_server.py"
    command = ["taskset", "-c", "1", sys.executable, str(fake), str(scenario)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        startup = _child_cpu(lambda: pinned(0, [str(BENCH), "--version"]))
        flags = ["--output-tokens", "2000", "--requests", "50", "--api-key", "", "--no-fixed-output"]
        holder: list[dict[str, Any]] = []
        started = time.perf_counter()
        cpu = _child_cpu(lambda: holder.append(run_bench(f"http://127.0.0.1:{port}/v1", workdir / "cost", flags)))
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
    events = results.decode_events(holder[0]["requests_events_gzip_b64"])
    streamed = sum(event["completion_tokens"] or 0 for event in events)
    return [
        f"bench's own cost against a local server that streams as fast as it can: {cpu:.2f} CPU seconds for "
        f"{streamed:,} streamed tokens in {wall:.1f} s wall; {(cpu - startup) / streamed * 1e6:.1f} microseconds of "
        f"CPU per token after the {startup:.2f} s that starting the bench process costs.",
    ]


def _child_cpu(action: Any) -> float:
    """CPU seconds (user and system) that the child processes started by ``action`` used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    action()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as folder:
        workdir = Path(folder)
        print("\n".join(peers_table(workdir)), flush=True)
        print("\n" + "\n".join(cpu_cost(workdir)))


if __name__ == "__main__":
    main()
