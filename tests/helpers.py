"""Shared test helpers: paths, the real ansible-playbook, and its JSON results."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from bench.rig.specs import knob_spec as merge_knob_spec
from bench.rig.specs import load_specs

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FAKES = REPO / "tests" / "fakes"
GROUP_VARS = REPO / "group_vars" / "all"
# Debian's prometheus, promtool, exporters and alertmanager, unpacked by scripts/testrig prometheus.
MONITORING_BIN = REPO / "build" / "testrig" / "prometheus" / "usr" / "bin"


def monitoring_binary(name: str) -> Path:
    """The path of one of the rig's monitoring binaries; fails, naming the step, when it is missing."""
    path = MONITORING_BIN / name
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} is missing: run scripts/testrig prometheus (scripts/test does)")
    return path


# A network namespace of its own, with loopback (brought up), one LAN (TEST-NET-1, 192.0.2.0/24,
# on a veth pair that exists only inside it) and no listener: what preflight sees of the host's
# TCP ports and networks is then the test's, not whatever else this machine runs. The playbook
# tests run in one by default (it needs root, as they do).
# /sys is mounted again inside, so that its interfaces (which Ansible's network facts list) are
# the namespace's own.
OWN_NETWORK_SETUP = (
    "mount -t sysfs sysfs /sys && ip link set lo up && ip link add llmrig0 type veth peer name llmrig1"
    " && ip addr add 192.0.2.1/24 dev llmrig0 && ip link set llmrig1 up && ip link set llmrig0 up"
)
OWN_NETWORK = ("unshare", "--net", "--mount", "--", "sh", "-c", f'{OWN_NETWORK_SETUP} && exec "$@"', "own-network")
# A local run (ansible_connection: local) reads SSH_CONNECTION from the controller's environment:
# the playbook tests run as an operator logged in over SSH from that LAN would, whatever the
# environment of the test itself holds (set it to '' for a run at the console).
SSH_SESSION = {"SSH_CONNECTION": "192.0.2.10 50022 192.0.2.1 22"}

# Host kinds the playbook tests run against: this machine (no GPU), and this machine with a
# protocol fake of nvidia-smi (or of lspci, before the driver) in front of PATH.
HOSTS: dict[str, list[Path]] = {
    "cpu": [],
    "gpu": [FAKES / "gpu-box"],
    "gpu-no-driver": [FAKES / "gpu-box-no-driver"],
    # nvidia-smi present but failing (set LLMRIG_FAKE_NO_DRIVER=1), lspci still lists the cards.
    "gpu-driver-not-loaded": [FAKES / "gpu-box", FAKES / "gpu-box-no-driver"],
}


@dataclass(frozen=True)
class PlaybookRun:
    """What one ansible-playbook run did, read from the ansible.posix.json callback."""

    returncode: int
    output: str
    stats: dict[str, dict[str, int]]
    failed_tasks: list[tuple[str, str, str]]  # (task name, task path, message)
    changed_tasks: list[str]  # names of the tasks that reported a change
    task_names: list[str]  # names of the tasks that ran on a host and were not skipped
    report_tasks: list[str]  # names of every task in the report, skipped ones too

    @property
    def changed(self) -> int:
        return sum(host["changed"] for host in self.stats.values())


def _message(result: dict[str, Any]) -> str:
    parts = [result.get("msg"), result.get("argument_errors")]
    return json.dumps([part for part in parts if part])


def run_playbook(
    playbook: str,
    extra_vars: dict[str, Any] | None = None,
    *,
    host: str = "cpu",
    check: bool = True,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
    tmp_path: Path,
    inventory: Path | None = None,
    timeout_s: float = 300,
    wrapper: tuple[str, ...] = OWN_NETWORK,
) -> PlaybookRun:
    """Run a playbook from the repository root (against localhost, or ``inventory``) and parse its JSON result.
    ``wrapper`` goes before the command: by default :data:`OWN_NETWORK`; ``()`` runs it in this one."""
    command = [*wrapper, str(BIN / "ansible-playbook"), playbook, *flags]
    if inventory is not None:
        command += ["-i", str(inventory)]
    if check:
        command.append("--check")
    if extra_vars:
        vars_file = tmp_path / "extra_vars.json"
        vars_file.write_text(json.dumps(extra_vars), encoding="utf-8")
        command += ["-e", f"@{vars_file}"]
    environment = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", **SSH_SESSION, **(env or {})}
    fakes = [str(folder) for folder in HOSTS[host]]
    environment["PATH"] = os.pathsep.join([*fakes, str(BIN), "/usr/sbin", "/usr/bin", "/sbin", "/bin"])
    done = subprocess.run(
        command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    # With -v flags Ansible prints its own lines before the callback's JSON document.
    start = 0 if done.stdout.startswith("{") else done.stdout.find("\n{\n") + 1
    try:
        report = json.loads(done.stdout[start:])
    except json.JSONDecodeError as exc:
        raise AssertionError(f"no JSON from ansible-playbook:\n{done.stdout}\n{done.stderr}") from exc
    failed = [
        (task["task"]["name"], task["task"].get("path", ""), _message(result))
        for play in report["plays"]
        for task in play["tasks"]
        for result in task["hosts"].values()
        if result.get("failed")
    ]
    changed = [
        task["task"]["name"]
        for play in report["plays"]
        for task in play["tasks"]
        for result in task["hosts"].values()
        if result.get("changed")
    ]
    ran = [
        task["task"]["name"]
        for play in report["plays"]
        for task in play["tasks"]
        for result in task["hosts"].values()
        if not result.get("skipped")
    ]
    listed = [task["task"]["name"] for play in report["plays"] for task in play["tasks"]]
    return PlaybookRun(done.returncode, done.stdout + done.stderr, report["stats"], failed, changed, ran, listed)


def render_units(
    playbook: str, variants: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each variant's units folder: ``playbook`` run once per variant (not in check mode) with
    ``units_dir`` (a fresh ``<tmp>/units``) and the variant's extra vars, for systemd-analyze to read."""
    folders = {}
    for variant, extra in variants.items():
        tmp = tmp_path_factory.mktemp(variant)
        units = tmp / "units"
        units.mkdir()
        run = run_playbook(playbook, {"units_dir": str(units), **extra}, check=False, tmp_path=tmp)
        assert run.returncode == 0, run.failed_tasks or run.output[-2000:]
        folders[variant] = units
    return folders


def ansible_render(expression: str, variables: dict[str, Any]) -> Any:
    """``expression`` templated by ansible on localhost with ``variables`` as extra vars (role
    variables copied from their files, Jinja and all, and the values they read)."""
    env = {**os.environ, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    command = [str(BIN / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "ansible.builtin.debug"]
    done = subprocess.run(
        [*command, "-e", json.dumps(variables), "-a", f"msg={expression}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]


def playbook_dump(
    playbook: str, dump_var: str, extra_vars: dict[str, Any], *, tmp_path: Path, **options: Any
) -> dict[str, Any]:
    """Run a test playbook (not in check mode) that writes a JSON file to the path in ``dump_var``;
    fail with the playbook's output if it fails, else return what it wrote."""
    dump = tmp_path / f"{dump_var}.json"
    run = run_playbook(playbook, {dump_var: str(dump), **extra_vars}, check=False, tmp_path=tmp_path, **options)
    assert run.returncode == 0, run.failed_tasks or run.output[-2000:]
    data: dict[str, Any] = json.loads(dump.read_text(encoding="utf-8"))
    return data


def group_vars() -> dict[str, dict[str, Any]]:
    """Every group_vars/all file, parsed, by file stem."""
    return {path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(GROUP_VARS.glob("*.yml"))}


def knob_names() -> set[str]:
    """Every knob defined in group_vars/all."""
    return {name for document in group_vars().values() for name in document}


def knob_roles() -> list[str]:
    """The roles whose argument specs type the knobs, as preflight lists them (its vars/main.yml)."""
    role_vars = yaml.safe_load((REPO / "roles" / "preflight" / "vars" / "main.yml").read_text(encoding="utf-8"))
    return list(role_vars["_preflight_knob_roles"])


def knob_documents() -> dict[str, dict[str, Any]]:
    """Each knob role's parsed meta/argument_specs.yml, by role name."""
    return load_specs(REPO / "roles", knob_roles())


def knob_spec() -> dict[str, dict[str, Any]]:
    """Every knob's option spec, merged from the roles as preflight merges them."""
    return merge_knob_spec(knob_documents())


def load_file_module(path: Path, name: str) -> ModuleType:
    """Import a Python file that is not on the path (an Ansible plugin or module)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LoopbackServer:
    """An HTTP server on 127.0.0.1, on a port the kernel picks, that serves ``handler`` (a thread per
    request) from a daemon thread until :meth:`close`; ``url`` is its address, without a path."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HealthEngine(LoopbackServer):
    """A loopback HTTP server whose /health answers the statuses queued in ``answers``."""

    def __init__(self) -> None:
        self.answers: list[int] = [200]
        self.probes = 0
        self.on_probe: Any = None
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                engine.probes += 1
                if engine.on_probe:
                    engine.on_probe()
                status = engine.answers.pop(0) if len(engine.answers) > 1 else engine.answers[0]
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self.url = f"{self.url}/health"

    @property
    def status(self) -> int:
        return self.answers[0]

    @status.setter
    def status(self, value: int) -> None:
        """Answer ``value`` to every probe from now on."""
        self.answers = [value]


def free_ports(count: int = 1) -> list[int]:
    """``count`` TCP ports free on the host's loopback now, all different (held open together
    while they are read, so that two calls in one test cannot get the same port)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def chat(base_url: str, key: str, messages: list[dict[str, str]], *, timeout_s: float = 60) -> str:
    """One chat completion of at most 8 tokens at temperature 0 from ``base_url`` (no /v1), with
    the API key; the answer's text."""
    body = {"model": "gemma3-270m", "messages": messages, "max_tokens": 8, "temperature": 0}
    request = urllib.request.Request(
        f"{base_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        answer: str = json.load(response)["choices"][0]["message"]["content"]
        return answer
