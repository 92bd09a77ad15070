"""The monitoring role (roles/monitoring): Prometheus' scrape jobs, the blackbox probes and the
daemons' arguments rendered by real Ansible from the role's own templates, checked by the real
promtool and blackbox exporter (Debian's packages, which scripts/testrig unpacks), then served by
a live Prometheus started with the role's own arguments, scraping a fake engine whose /metrics
requires the API key: the key reaches it from the credentials file, and without it the target is
down. The job set follows the engine table: Ollama has no engine job, a host without NVIDIA GPUs
no gpu job."""

from __future__ import annotations

import http.server
import json
import shlex
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, ansible_render, free_ports, load_file_module, monitoring_binary, run_playbook

pytestmark = pytest.mark.ansible

ROLE = REPO / "roles" / "monitoring"
KEY = "Kq7wZt3xN8vR2mB5pL9sD4fG6hJ1cY0e"
TARGETS = load_file_module(REPO / "ansible" / "plugins" / "modules" / "llmrig_prometheus_targets.py", "targets")
BINARIES = {
    "blackbox": "prometheus-blackbox-exporter",
    "node": "prometheus-node-exporter",
    "prometheus": "prometheus",
}
ENGINES = {
    "vllm": ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/health"),
    "llamacpp": ("http://127.0.0.1:8081/v1", "http://127.0.0.1:8081/health"),
    "ollama": ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/"),
}


def _variables(engine: str = "vllm", **overrides: Any) -> dict[str, Any]:
    """The role's constants and the knobs its templates read, with the engine the engine role publishes."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    knobs = yaml.safe_load((REPO / "group_vars" / "all" / "monitoring.yml").read_text(encoding="utf-8"))
    local_base_url, health_url = ENGINES[engine]
    return {
        **role_vars,
        **knobs,
        "llmrig_config_dir": "/etc/llmrig",
        "open_webui_enabled": True,
        "open_webui_host": "0.0.0.0",
        "open_webui_port": 8080,
        "llmrig_engine": {"name": engine, "local_base_url": local_base_url, "health_url": health_url},
        # What tasks/preflight.yml decides, from bench's engine table and preflight's GPU count.
        "__monitoring_engine": {
            "name": "{{ llmrig_engine.name }}",
            "target": "{{ llmrig_engine.local_base_url | ansible.builtin.urlsplit('netloc') }}",
            "health_url": "{{ llmrig_engine.health_url }}",
            "metrics": "{{ llmrig_engine.name | llmrig_engine_has_metrics }}",
            "keyed": "{{ llmrig_engine.name | llmrig_engine_authenticates }}",
        },
        "__monitoring_gpu": False,
        "ansible_managed": "Ansible managed",  # the template module's default; debug has none
        **overrides,
    }


def _render(template: str, variables: dict[str, Any]) -> str:
    """roles/monitoring/templates/``template``, templated by ansible with ``variables``."""
    text = (ROLE / "templates" / template).read_text(encoding="utf-8")
    rendered = ansible_render("{{ __template }}", {**variables, "__template": text})
    assert isinstance(rendered, str)
    return rendered


def _jobs(config: str) -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in yaml.safe_load(config)["scrape_configs"]}


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """prometheus.yml for each engine on a host without GPUs, and for vLLM on a host with them."""
    found = {engine: _render("prometheus.yml.j2", _variables(engine)) for engine in ENGINES}
    found["vllm-gpu"] = _render("prometheus.yml.j2", _variables("vllm", __monitoring_gpu=True))
    gateway = {"_monitoring_gateway": True, "gateway_metrics_port": 8101}
    found["vllm-gateway"] = _render("prometheus.yml.j2", _variables("vllm", **gateway))
    return found


def test_the_job_set_follows_the_engine_table(rendered: dict[str, str]) -> None:
    """vLLM and llama.cpp: their own /metrics (with the key) and the health probe; Ollama, which
    serves no /metrics, the health probe alone. No gpu job without NVIDIA GPUs, one with them; a
    gateway job on a host of llmrig_gateway only."""
    base = {"prometheus", "node", "engine_health", "open_webui"}
    assert set(_jobs(rendered["vllm"])) == base | {"engine"}
    assert set(_jobs(rendered["llamacpp"])) == base | {"engine"}
    assert set(_jobs(rendered["ollama"])) == base
    assert set(_jobs(rendered["vllm-gpu"])) == base | {"engine", "gpu"}
    assert _jobs(rendered["vllm-gpu"])["gpu"]["static_configs"][0]["targets"] == ["127.0.0.1:9835"]
    assert set(_jobs(rendered["vllm-gateway"])) == base | {"engine", "gateway"}  # a host of llmrig_gateway
    assert _jobs(rendered["vllm-gateway"])["gateway"]["static_configs"][0]["targets"] == ["127.0.0.1:8101"]
    engine = _jobs(rendered["vllm"])["engine"]
    assert engine["static_configs"][0]["targets"] == ["127.0.0.1:8000"]
    assert engine["authorization"] == {"type": "Bearer", "credentials_file": "/etc/prometheus/llmrig/api_key"}
    health = _jobs(rendered["ollama"])["engine_health"]
    assert health["static_configs"][0]["targets"] == ["http://127.0.0.1:11434/"]
    assert health["params"] == {"module": ["http_2xx"]}
    assert _jobs(rendered["vllm"])["open_webui"]["static_configs"][0]["targets"] == ["http://127.0.0.1:8080/health"]
    assert KEY not in rendered["vllm"]
    assert rendered["vllm"].startswith("#\n# Ansible managed\n#\n")


def test_open_webui_off_has_no_probe_and_receivers_become_alertmanagers() -> None:
    """Without Open WebUI its probe is absent; an alertmanager receiver is Prometheus' Alertmanager,
    a webhook receiver sends through the local one."""
    receivers = [
        {"kind": "alertmanager", "url": "https://alerts.example.net/am"},
        {"kind": "webhook", "url": "http://192.168.1.9:5001/hook"},
    ]
    config = yaml.safe_load(
        _render("prometheus.yml.j2", _variables(open_webui_enabled=False, monitoring_alert_receivers=receivers))
    )
    assert "open_webui" not in {job["job_name"] for job in config["scrape_configs"]}
    assert config["alerting"]["alertmanagers"] == [
        {"scheme": "https", "path_prefix": "/am", "static_configs": [{"targets": ["alerts.example.net"]}]},
        {"scheme": "http", "path_prefix": "/", "static_configs": [{"targets": ["127.0.0.1:9093"]}]},
    ]
    default = yaml.safe_load(_render("prometheus.yml.j2", _variables()))
    assert "alerting" not in default


def test_promtool_and_the_exporters_accept_the_rendered_files(tmp_path: Path, rendered: dict[str, str]) -> None:
    """promtool check config passes every rendered prometheus.yml (with the rules and the key's copy
    it names in place), promtool check rules the rules file, the blackbox exporter its probes and
    amtool the Alertmanager's webhook receivers."""
    rules = tmp_path / "llmrig-alerts.yml"
    rules.write_text((ROLE / "files" / "llmrig-alerts.yml").read_text(encoding="utf-8"), encoding="utf-8")
    key = tmp_path / "api_key"
    key.write_text(KEY + "\n", encoding="utf-8")
    promtool = str(monitoring_binary("promtool"))
    for name, text in rendered.items():
        config = tmp_path / f"{name}.yml"
        config.write_text(
            text.replace("/etc/prometheus/llmrig-alerts.yml", str(rules)).replace(
                "/etc/prometheus/llmrig/api_key", str(key)
            ),
            encoding="utf-8",
        )
        done = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    blackbox = tmp_path / "blackbox.yml"
    blackbox.write_text(_render("blackbox.yml.j2", _variables()), encoding="utf-8")
    exporter = str(monitoring_binary("prometheus-blackbox-exporter"))
    done = subprocess.run(
        [exporter, "--config.check", f"--config.file={blackbox}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    alertmanager = tmp_path / "alertmanager.yml"
    receivers = [{"kind": "webhook", "url": "http://192.168.1.9:5001/hook"}]
    alertmanager.write_text(
        _render("alertmanager.yml.j2", _variables(monitoring_alert_receivers=receivers)), encoding="utf-8"
    )
    done = subprocess.run(
        [str(monitoring_binary("amtool")), "check-config", str(alertmanager)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _args(unit: str, variables: dict[str, Any]) -> list[str]:
    """ARGS of roles/monitoring/templates/default.j2 for ``unit`` (prometheus, node, blackbox)."""
    rendered = _render(
        "default.j2",
        {**variables, "__monitoring_default": {"unit": unit, "args": f"{{{{ _monitoring_{unit}_args }}}}"}},
    )
    line = next(line for line in rendered.splitlines() if line.startswith("ARGS="))
    # systemd splits an unbraced $ARGS at whitespace, as the shell would.
    (value,) = shlex.split(line.removeprefix("ARGS="))
    return value.split()


def test_the_daemons_listen_on_loopback_and_prometheus_keeps_its_lifecycle_api_off() -> None:
    """Prometheus: 127.0.0.1:9090, 15 days, no size limit by default, no --web.enable-lifecycle;
    the exporters on loopback, the node exporter's textfile directory Debian's."""
    prometheus = _args("prometheus", _variables())
    assert "--web.listen-address=127.0.0.1:9090" in prometheus
    assert "--storage.tsdb.retention.time=15d" in prometheus
    assert not [arg for arg in prometheus if "lifecycle" in arg or "retention.size" in arg]
    sized = _args("prometheus", _variables(monitoring_retention_size="10GB", monitoring_prometheus_host="::1"))
    assert "--storage.tsdb.retention.size=10GB" in sized
    assert "--web.listen-address=[::1]:9090" in sized
    assert _args("node", _variables()) == [
        "--web.listen-address=127.0.0.1:9100",
        "--collector.textfile.directory=/var/lib/prometheus/node-exporter",
    ]
    assert "--web.listen-address=127.0.0.1:9115" in _args("blackbox", _variables())


class _Engine:
    """A fake engine on loopback: /metrics answers vLLM-shaped samples with the key only, /health always."""

    def __init__(self) -> None:
        self.authorizations: list[str | None] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    fake.authorizations.append(self.headers.get("Authorization"))
                    if self.headers.get("Authorization") != f"Bearer {KEY}":
                        self.send_response(401)
                        self.end_headers()
                        return
                    body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
                else:
                    body = b"ok"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert process.poll() is None, log.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, f"nothing listened on {port} within 30 s"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Prometheus with the role's own arguments and scrape jobs (scraping every second), the real
    blackbox and node exporters with the role's arguments (the node exporter's textfile directory
    holding the role's headroom metric for this directory's mount, with a headroom larger than any
    disk), and the fake engine."""
    tmp = tmp_path_factory.mktemp("prometheus")
    engine = _Engine()
    key = tmp / "api_key"
    key.write_text(KEY + "\n", encoding="utf-8")
    key.chmod(0o600)
    rules = tmp / "llmrig-alerts.yml"
    rules.write_text((ROLE / "files" / "llmrig-alerts.yml").read_text(encoding="utf-8"), encoding="utf-8")
    prometheus_port, blackbox_port, node_port = free_ports(3)
    textfile = tmp / "textfile"
    textfile.mkdir()
    mount = subprocess.run(
        ["findmnt", "--noheadings", "--output", "TARGET", "--target", str(tmp)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    variables = _variables(
        "vllm",
        open_webui_enabled=False,
        monitoring_prometheus_port=prometheus_port,
        monitoring_scrape_interval="1s",
        llmrig_engine={
            "name": "vllm",
            "local_base_url": f"http://127.0.0.1:{engine.port}/v1",
            "health_url": f"http://127.0.0.1:{engine.port}/health",
        },
        _monitoring_config_path=str(tmp / "prometheus.yml"),
        _monitoring_rules_path=str(rules),
        _monitoring_credentials_file=str(key),
        _monitoring_blackbox_config_path=str(tmp / "blackbox.yml"),
        _monitoring_blackbox_address=f"127.0.0.1:{blackbox_port}",
        _monitoring_node_address=f"127.0.0.1:{node_port}",
        _monitoring_textfile_dir=str(textfile),
        __monitoring_models_mount={"stdout": mount + "\n"},
        llmrig_disk_headroom_gib=2**20,  # 1 PiB: more than this disk has free
    )
    (textfile / "llmrig_models_dir.prom").write_text(_render("llmrig_models_dir.prom.j2", variables), encoding="utf-8")
    (tmp / "prometheus.yml").write_text(_render("prometheus.yml.j2", variables), encoding="utf-8")
    (tmp / "blackbox.yml").write_text(_render("blackbox.yml.j2", variables), encoding="utf-8")
    processes: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for name, args, port in (
            ("blackbox", _args("blackbox", variables), blackbox_port),
            ("node", _args("node", variables), node_port),
            ("prometheus", [*_args("prometheus", variables), f"--storage.tsdb.path={tmp / 'data'}"], prometheus_port),
        ):
            log_path = tmp / f"{name}.log"
            log = log_path.open("w")
            logs.append(log)
            binary = monitoring_binary(BINARIES[name])
            process = subprocess.Popen([str(binary), *args], stdout=log, stderr=log, cwd=tmp)
            processes.append(process)
            _wait_listening(port, process, log_path)
        yield {"url": f"http://127.0.0.1:{prometheus_port}", "engine": engine, "key": key, "mount": mount}
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)
        for log in logs:
            log.close()
        engine.close()


def _ready(url: str) -> int:
    """The status of Prometheus' /-/ready once it stops answering 503 (it listens before its
    storage is open; on a busy machine that takes seconds), within 60 s."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=10) as ready:
                return int(ready.status)
        except urllib.error.HTTPError as error:
            if error.code != 503 or time.monotonic() > deadline:
                return error.code
        time.sleep(0.2)


def _targets(url: str) -> dict[str, dict[str, Any]]:
    """Each job's one target, as the verify module reads them once all were scraped anew."""
    result = TARGETS.wait({"url": url, "timeout_s": 60, "interval_s": 0.5})
    assert not result.get("failed"), result
    return {target["job"]: target for target in result["targets"]}


def test_prometheus_scrapes_the_engine_with_the_key_from_the_credentials_file(live: dict[str, Any]) -> None:
    """Prometheus is ready; every target is up: the engine's /metrics, reached with Bearer <the key>
    read from the file (its trailing newline dropped), its health probe through the real blackbox
    exporter, the real node exporter, Prometheus itself."""
    assert _ready(live["url"]) == 200
    targets = _targets(live["url"])
    assert set(targets) == {"prometheus", "node", "engine", "engine_health"}
    assert {job: target["health"] for job, target in targets.items()} == dict.fromkeys(targets, "up"), targets
    assert f"Bearer {KEY}" in live["engine"].authorizations


def _query(url: str, expression: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=10) as answer:
        document = json.load(answer)
    assert document["status"] == "success", document
    result: list[dict[str, Any]] = document["data"]["result"]
    return result


def test_the_headroom_metric_joins_the_node_exporters_free_bytes(live: dict[str, Any]) -> None:
    """The role's textfile metric, served by the real node exporter, carries the models disk's
    mount point, so the disk alert's expression (free bytes below the headroom, joined on the
    mount point) finds that disk when the headroom is larger than what is free."""
    _targets(live["url"])  # every target scraped once
    headroom = _query(live["url"], "llmrig_models_dir_headroom_bytes")
    assert [(sample["metric"]["mountpoint"], sample["value"][1]) for sample in headroom] == [
        (live["mount"], str(2**20 * 1024**3))
    ]
    low = _query(
        live["url"], "node_filesystem_avail_bytes < on(mountpoint) group_left llmrig_models_dir_headroom_bytes"
    )
    assert {sample["metric"]["mountpoint"] for sample in low} == {live["mount"]}, low


def test_without_the_key_the_engine_target_is_down(live: dict[str, Any]) -> None:
    """A wrong key in the credentials file (Prometheus reads it at every scrape) and then no file
    at all: the engine answers 401 or is not asked, and its target is down."""
    key: Path = live["key"]
    key.write_text("not-the-key\n", encoding="utf-8")
    result = TARGETS.wait({"url": live["url"], "timeout_s": 60, "interval_s": 0.5})
    assert [target["job"] for target in result["down"]] == ["engine"], result
    assert "401" in result["down"][0]["last_error"]
    key.unlink()
    targets = _targets(live["url"])
    assert targets["engine"]["health"] == "down"
    assert "api_key" in targets["engine"]["last_error"]


ENGINE_FACT = {
    "name": "vllm",
    "local_base_url": "http://127.0.0.1:8000/v1",
    "health_url": "http://127.0.0.1:8000/health",
}


def test_check_mode_on_a_fresh_host_installs_or_stops_without_failing(tmp_path: Path) -> None:
    """site.yml --check --tags monitoring on this machine, where none of the packages is installed:
    enabled, it would install and configure (no file the packages bring is needed yet), also on a
    box that already has the engine's key (a box installed before monitoring); disabled,
    it stops nothing that does not exist and does not fail."""
    enabled = run_playbook(
        "site.yml", {"llmrig_engine": ENGINE_FACT}, flags=("--tags", "monitoring"), tmp_path=tmp_path
    )
    assert enabled.returncode == 0, enabled.failed_tasks or enabled.output[-2000:]
    ran = [name for name in enabled.task_names if name.startswith("monitoring : ")]
    assert any("install | Install Prometheus" in name for name in ran), ran
    assert any("Write Prometheus' arguments" in name for name in ran), ran
    assert not any(name.startswith("monitoring : disabled") for name in ran), ran
    # A box that already serves an engine (its key file there), before monitoring was installed:
    # the upgrade path of every box. Check mode copies no key into a directory not made yet.
    config = tmp_path / "config"
    config.mkdir()
    (config / "api_key").write_text(KEY, encoding="utf-8")
    (tmp_path / "upgrade").mkdir()
    upgrade = run_playbook(
        "site.yml",
        {"llmrig_engine": ENGINE_FACT, "llmrig_config_dir": str(config)},
        flags=("--tags", "monitoring"),
        tmp_path=tmp_path / "upgrade",
    )
    assert upgrade.returncode == 0, upgrade.failed_tasks or upgrade.output[-2000:]
    (tmp_path / "off").mkdir()
    disabled = run_playbook(
        "site.yml",
        {"llmrig_engine": ENGINE_FACT, "monitoring_enabled": False},
        flags=("--tags", "monitoring"),
        tmp_path=tmp_path / "off",
    )
    assert disabled.returncode == 0, disabled.failed_tasks or disabled.output[-2000:]
    ran = [name for name in disabled.task_names if name.startswith("monitoring : ")]
    # No unit exists here, so the stop task loops over nothing.
    assert not any(name.startswith("monitoring : disabled | Stop") for name in ran), ran
    assert [name for name in ran if "install" in name] == []
    assert "monitoring : disabled | Remove Prometheus' copy of the API key" in ran


def test_the_verify_module_fails_naming_what_it_waited_for() -> None:
    """No Prometheus on the port: the module gives up after its time-out and says it got no answer."""
    url = f"http://127.0.0.1:{free_ports()[0]}"
    result = TARGETS.wait({"url": url, "timeout_s": 1, "interval_s": 0.2})
    assert result["failed"] is True
    assert result["msg"].startswith(f"Prometheus at {url}, after 1 s: {url}/api/v1/targets did not answer")
