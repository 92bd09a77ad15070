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

from bench import results

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


def run_bench(base_url: str, workdir: Path, extra: list[str] | None = None) -> dict[str, Any]:
    results = workdir / "bench-results"
    command = [str(BENCH), "run", "single", "--base-url", base_url, "--tag", "peers", "--results-dir", str(results)]
    command += ["--requests", str(REQUESTS), "--input-tokens", str(ISL), "--output-tokens", str(OSL), *(extra or [])]
    pinned(0, command)
    (path,) = (results / "peers").glob("*.json")
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def bench_medians(document: dict[str, Any]) -> tuple[float, float]:
    level = document["levels"][0]
    return level["latency"]["ttft_ms"]["p50"], level["itl_token_ms"]["p50"]


def run_aiperf(port: int, model: str, workdir: Path) -> tuple[float, float]:
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
    return float(records["time_to_first_token"]["p50"]), float(records["inter_token_latency"]["p50"])


def run_guidellm(port: int, model: str, workdir: Path) -> tuple[float, float]:
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
    )


def peers_table(workdir: Path) -> list[str]:
    port = free_port()
    launcher = REPO / "tests" / "integration" / "xllamacpp_server.py"
    command = ["taskset", "-c", "1", str(RIG / "llamacpp" / "bin" / "python"), str(launcher), str(MODEL), str(port), ""]
    with (workdir / "llamacpp.log").open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=sink)
    try:
        wait_healthy(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
            model = json.loads(response.read())["data"][0]["id"]
        ours = bench_medians(run_bench(f"http://127.0.0.1:{port}/v1", workdir))
        rows = [("bench", ours)]
        for name, runner in (("AIPerf 0.13.0", run_aiperf), ("GuideLLM 0.8.1", run_guidellm)):
            rows.append((name, runner(port, model, workdir)))
    finally:
        server.terminate()
        server.wait(timeout=30)
    lines = [
        f"llama.cpp (xllamacpp) serving gemma3-270m on core 1; each tool on core 0; {REQUESTS} requests, "
        f"concurrency 1, {ISL} prompt tokens, {OSL} output tokens.",
        "",
        "| tool | TTFT p50 ms | ITL p50 ms | TTFT / bench | ITL / bench |",
        "|---|---|---|---|---|",
    ]
    for name, (ttft, itl) in rows:
        lines.append(f"| {name} | {ttft:.1f} | {itl:.2f} | {ttft / ours[0]:.3f} | {itl / ours[1]:.3f} |")
    return lines


def cpu_cost(workdir: Path) -> list[str]:
    scenario = workdir / "fast.json"
    scenario.write_text(
        json.dumps({"api_key": "", "ttft_ms": 0, "itl_ms": 0, "content_tokens": 2000}), encoding="utf-8"
    )
    fake = REPO / "tests" / "fakes" / "scripted_openai_server.py"
    server = subprocess.Popen(
        ["taskset", "-c", "1", sys.executable, str(fake), str(scenario)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        document = run_bench(
            f"http://127.0.0.1:{port}/v1",
            workdir / "cost",
            ["--output-tokens", "2000", "--api-key", "", "--no-fixed-output"],
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    streamed = sum(
        event["completion_tokens"] or 0 for event in results.decode_events(document["requests_events_gzip_b64"])
    )
    return [
        f"bench's own cost: {cpu:.2f} CPU seconds for {streamed:,} streamed tokens in {wall:.1f} s wall, "
        f"{cpu / streamed * 1e6:.1f} microseconds of CPU per token (process start and calibration included).",
    ]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as folder:
        workdir = Path(folder)
        lines = [*peers_table(workdir), "", *cpu_cost(workdir)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
