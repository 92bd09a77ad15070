"""Benchmark script (not a test): bench side by side with AIPerf and GuideLLM, and what each costs.

1. One llama.cpp server (xllamacpp, gemma3-270m, one thread) pinned to core 1; each tool pinned
   to core 0 in turn sends the same workload (10 requests, one at a time, 64 prompt tokens,
   32 output tokens). The table gives each tool's TTFT and inter-token medians and their ratio
   to bench's: the tools should agree within a few percent when all of them measure honestly.
2. Each tool's CPU per streamed token (tests/benchmarks/peer_cost.py): against the scripted server (a
   local fake that streams as fast as it can, start-up cancelled by pairs of runs) and against
   the same llama.cpp server (read at each answer's end while the tool runs), and bench's ratio
   to the lighter peer.

Run it with scripts/bench-peers, which builds what it needs under build/. Prints Markdown.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.benchmarks import peer_cost

REPO = Path(__file__).resolve().parents[2]
RIG = REPO / "build" / "testrig"
PEERS = REPO / "build" / "peers"
BENCH = REPO / ".venv" / "bin" / "bench"
MODEL = RIG / "models" / "gemma-3-270m-q4_k_m.gguf"
TOKENIZER = RIG / "models" / "gemma3-270m-hf"
REQUESTS, ISL, OSL = 10, 64, 32
FAST_SIZES = (10, 500, 50_000)  # requests, short and long answer: 495,000 tokens more
# The scripted server writes this many events at once, as a batching server sends every stream's
# token of a step at once. With one event per write it is slower than the clients, and each of
# them then spends its time waking up for the next event (about a core's worth, whatever it does).
BURST = 256
LLAMACPP_ANSWERS = (7, 256)  # requests and answer length: six steps of a whole answer, about 40 s
OFFLINE = dict(os.environ, HF_HUB_OFFLINE="1")
ONLINE = {name: value for name, value in os.environ.items() if name not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}}


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


def _run(command: list[str], **kwargs: Any) -> None:
    done = subprocess.run(["taskset", "-c", "0", *command], capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def bench_command(workload: peer_cost.Workload, folder: Path) -> list[str]:
    command = [str(BENCH), "run", "single", "--base-url", f"{workload.base_url}/v1", "--model", workload.model]
    command += ["--tag", "cost", "--results-dir", str(folder / "results"), "--api-key", ""]
    command += ["--requests", str(workload.requests), "--input-tokens", str(workload.input_tokens)]
    return [*command, "--output-tokens", str(workload.output_tokens)]


def aiperf_command(workload: peer_cost.Workload, folder: Path) -> list[str]:
    command = [str(PEERS / "aiperf" / "bin" / "aiperf"), "profile", "--model", workload.model]
    command += ["--url", workload.base_url, "--endpoint-type", "chat", "--streaming", "--tokenizer", str(TOKENIZER)]
    command += ["--isl", str(workload.input_tokens), "--osl", str(workload.output_tokens)]
    command += ["--extra-inputs", "ignore_eos:true", "--request-count", str(workload.requests)]
    return [*command, "--concurrency", "1", "--artifact-dir", str(folder), "--ui-type", "none"]


def guidellm_command(workload: peer_cost.Workload, folder: Path) -> list[str]:
    command = [str(PEERS / "guidellm" / "bin" / "guidellm"), "run"]
    command += ["--backend", f"kind=openai_http,target={workload.base_url},model={workload.model}"]
    command += ["--profile", "kind=synchronous", "--constraint", f"kind=max_requests,count={workload.requests}"]
    command += ["--tokenizer", f"kind=hf_auto,model={TOKENIZER}"]
    command += ["--data", f"kind=synthetic_text,prompt_tokens={workload.input_tokens},"]
    command[-1] += f"output_tokens={workload.output_tokens}"
    return [*command, "--output", f"kind=json,path={folder / 'guidellm.json'}", "--disable-progress"]


# Each tool with the environment it runs in: GuideLLM offline (it would ask the Hub about the
# tokenizer), AIPerf not (it reads any HF_HUB_OFFLINE, even "0", as offline and then looks for
# the tokenizer in the Hub cache instead of the folder it is given).
TOOLS: tuple[tuple[str, peer_cost.Runner, dict[str, str] | None], ...] = (
    ("bench", bench_command, None),
    ("AIPerf 0.13.0", aiperf_command, ONLINE),
    ("GuideLLM 0.8.1", guidellm_command, OFFLINE),
)


def bench_medians(folder: Path) -> tuple[float, float, float]:
    """TTFT p50, and TPOT p50: what AIPerf and GuideLLM call ITL, (E2E - TTFT) / (tokens - 1)."""
    (path,) = (folder / "results").rglob("*.json")
    level = json.loads(path.read_text(encoding="utf-8"))["levels"][0]
    return level["latency"]["ttft_ms"]["p50"], level["latency"]["tpot_ms"]["p50"], level["tokens"]["input"]["p50"]


def aiperf_medians(folder: Path) -> tuple[float, float, float]:
    (export,) = folder.rglob("profile_export_aiperf.json")
    data = json.loads(export.read_text(encoding="utf-8"))
    records = data.get("records", data)
    prompt = float(records["usage_prompt_tokens"]["p50"])  # as the server counted it, chat template included
    return float(records["time_to_first_token"]["p50"]), float(records["inter_token_latency"]["p50"]), prompt


def guidellm_medians(folder: Path) -> tuple[float, float, float]:
    data = json.loads((folder / "guidellm.json").read_text(encoding="utf-8"))
    metrics = data["benchmarks"][0]["metrics"]
    return (
        float(metrics["time_to_first_token_ms"]["successful"]["median"]),
        float(metrics["inter_token_latency_ms"]["successful"]["median"]),
        float(metrics["prompt_token_count"]["successful"]["median"]),
    )


@contextlib.contextmanager
def llamacpp_server(workdir: Path) -> Iterator[tuple[str, str]]:
    """llama.cpp serving gemma3-270m on core 1, as the llamacpp role runs it: its URL and model."""
    port = free_port()
    launcher = REPO / "roles" / "llamacpp" / "files" / "llmrig-llama-server"
    command = ["taskset", "-c", "1", str(RIG / "llamacpp" / "bin" / "python"), str(launcher), "--model", str(MODEL)]
    command += ["--port", str(port), "--ctx-size", "4096", "--parallel", "2", "--threads", "1", "--metrics"]
    command += ["--chat-template", "chatml"]
    with (workdir / "llamacpp.log").open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=sink)
    try:
        wait_healthy(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
            model = json.loads(response.read())["data"][0]["id"]
        yield f"http://127.0.0.1:{port}", model
    finally:
        server.terminate()
        server.wait(timeout=30)


def peers_table(base_url: str, model: str, workdir: Path) -> list[str]:
    workload = peer_cost.Workload(base_url, model, REQUESTS, ISL, OSL)
    peers = []
    for (name, command, env), medians in zip(TOOLS[1:], (aiperf_medians, guidellm_medians), strict=True):
        folder = workdir / "table" / name.split(maxsplit=1)[0]
        folder.mkdir(parents=True)
        _run(command(workload, folder), stdin=subprocess.DEVNULL, env=env)
        peers.append((name, medians(folder)))
    # Both peers count --isl before the chat template; bench counts what the server counts.
    # Give bench the prompt length the server saw from the peers, so all three send the same.
    folder = workdir / "table" / "bench"
    _run(bench_command(peer_cost.Workload(base_url, model, REQUESTS, round(peers[0][1][2]), OSL), folder))
    ours = bench_medians(folder)
    lines = [
        f"llama.cpp (xllamacpp) serving gemma3-270m on core 1; each tool on core 0; {REQUESTS} requests, "
        f"concurrency 1, --isl {ISL} for the peers, {OSL} output tokens. ITL here is (E2E - TTFT) / (tokens - 1) "
        "per request, which bench reports as TPOT.",
        "",
        "| tool | prompt tokens (server) | TTFT p50 ms | ITL p50 ms | TTFT / bench | ITL / bench |",
        "|---|---|---|---|---|---|",
    ]
    for name, (ttft, itl, prompt) in [("bench", ours), *peers]:
        lines.append(f"| {name} | {prompt:.0f} | {ttft:.1f} | {itl:.2f} | {ttft / ours[0]:.3f} | {itl / ours[1]:.3f} |")
    return lines


def costs_against(
    base_url: str, model: str, sizes: tuple[int, int, int], tokens: Callable[[], int], workdir: Path
) -> list[peer_cost.Cost]:
    """Each tool's cost per extra token against one server: ``sizes`` is requests, short and long answer."""
    requests, short_osl, long_osl = sizes
    short, long = (peer_cost.Workload(base_url, model, requests, ISL, length) for length in (short_osl, long_osl))
    return [
        peer_cost.measure(name, runner, (short, long), tokens=tokens, workdir=workdir, env=env)
        for name, runner, env in TOOLS
    ]


def cpu_cost(workdir: Path, llamacpp_url: str, model: str) -> list[str]:
    """Every tool's CPU per streamed token, against the scripted server streaming as fast as it
    can and against the real llama.cpp server, and bench's ratio to the lighter peer."""
    event_log = workdir / "sent.jsonl"
    scenario = workdir / "fast.json"
    scenario.write_text(
        json.dumps(
            {
                "api_key": "",
                "ttft_ms": 0,
                "itl_ms": 0,
                "content_tokens": 100_000,
                "burst_events": BURST,
                "max_model_len": 200_000,
                "event_log": str(event_log),
            }
        ),
        encoding="utf-8",
    )
    fake = REPO / "tests" / "fakes" / "scripted_openai_server.py"
    server = subprocess.Popen(
        ["taskset", "-c", "1", sys.executable, str(fake), str(scenario)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        fast = costs_against(
            f"http://127.0.0.1:{port}", "scripted", FAST_SIZES, peer_cost.scripted_tokens(event_log), workdir / "fast"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
    tokens = peer_cost.llamacpp_tokens(llamacpp_url)
    answers = peer_cost.Workload(llamacpp_url, model, LLAMACPP_ANSWERS[0], ISL, LLAMACPP_ANSWERS[1])
    real = [
        peer_cost.steady(name, runner, answers, tokens=tokens, workdir=workdir / "llamacpp", env=env)
        for name, runner, env in TOOLS
    ]
    lines = [
        f"CPU per streamed token ({peer_cost.accounting()}; each tool on core 0, the server on core 1). "
        f"Scripted server, {BURST} events per write, as fast as it can send: {FAST_SIZES[0]} requests at "
        f"{FAST_SIZES[1]} and at {FAST_SIZES[2]} tokens, the CPU difference over the difference in tokens "
        "streamed (start-up cancels), median of three pairs. llama.cpp, one event per token: "
        f"{LLAMACPP_ANSWERS[0]} requests of {LLAMACPP_ANSWERS[1]} tokens, the CPU from one answer's end "
        "to the next over its tokens, median over the answers.",
        "",
        "| tool | scripted server: µs per token (range) | tokens short / long | llama.cpp: µs per token "
        "(range) | answers |",
        "|---|---|---|---|---|",
    ]
    for one, other in zip(fast, real, strict=True):
        (low, high), (low_real, high_real) = one.spread_us, other.spread_us
        first = one.pairs[0]
        lines.append(
            f"| {one.tool} | {one.per_token_us:.1f} ({low:.1f}-{high:.1f}) | {first.tokens_short:,} / "
            f"{first.tokens_long:,} | {other.per_token_us:.0f} ({low_real:.0f}-{high_real:.0f}) | "
            f"{len(other.slopes_us)} |"
        )
    lines.append("")
    for where, costs in (
        ("scripted server", [(cost.tool, cost.per_token_us) for cost in fast]),
        ("llama.cpp", [(cost.tool, cost.per_token_us) for cost in real]),
    ):
        (_, ours), *peers = costs
        lighter, theirs = min(peers, key=lambda peer: peer[1])
        verdict = "met" if ours / theirs <= 0.5 else "NOT met"
        lines.append(f"- {where}: bench / lighter peer ({lighter}) = {ours / theirs:.2f} (target <= 0.50: {verdict})")
    return lines


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as folder:
        workdir = Path(folder)
        with llamacpp_server(workdir) as (base_url, model):
            print("\n".join(peers_table(base_url, model, workdir)), flush=True)
            print("\n" + "\n".join(cpu_cost(workdir, base_url, model)))


if __name__ == "__main__":
    main()
