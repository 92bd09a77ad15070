"""A fresh box for the container tiers and the demo: a podman container with systemd as PID 1,
reached by Ansible the way a real box is (ssh as root with a key, pipelining on; the transport is
the container's own sshd in inetd mode, started through ``podman exec``), with chosen ports
published on the host's loopback only.

``python -m tests.box up NAME --dir DIR --publish PORT ...`` starts one (or finds it running) for
``scripts/demo``, with :func:`cpu_host_vars` (the API proxy on one port); ``tests/e2e`` calls
:func:`start` directly. Needs the environment that
``scripts/testrig env`` prints (CONTAINERS_CONF, LLMRIG_TESTRIG_IMAGE, LLMRIG_WHEELHOUSE).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.rig.engines import ENGINES
from tests.helpers import PlaybookRun, free_ports, run_playbook

HOST = "box"  # the inventory name of the box (host_vars/box.yml, artifacts/box/)
PLAYBOOK_TIMEOUT_S = 1500
# The port inside the box where the API proxy (roles/reverse_proxy) serves whichever engine runs,
# so that its published port (and the engine URL the demo prints) stays true across engine
# switches; Open WebUI keeps its own. The engines listen on the box's loopback, vLLM on
# BOX_VLLM_PORT since API_PORT is the proxy's.
API_PORT = 8000
BOX_VLLM_PORT = 8010


@dataclass
class Box:
    """The container, its inventory, and the controller-side artifacts directory."""

    name: str
    inventory: Path
    artifacts: Path
    tmp: Path
    host: str = HOST
    outputs: list[str] = field(default_factory=list)  # every playbook run's stdout and stderr

    def sh(
        self, command: str, *, check: bool = True, timeout: float = 120, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in the container; ``stdin`` is how a secret gets in (never argv)."""
        done = subprocess.run(
            ["podman", "exec", *(["-i"] if stdin is not None else []), self.name, "sh", "-c", command],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{command!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def play(self, playbook: str, *flags: str, **extra_vars: Any) -> PlaybookRun:
        run = run_playbook(
            playbook,
            extra_vars,
            check="--check" in flags,
            flags=tuple(flag for flag in flags if flag != "--check"),
            tmp_path=self.tmp,
            inventory=self.inventory,
            timeout_s=PLAYBOOK_TIMEOUT_S,
            wrapper=(),  # the box is a container reached through podman; its ports are its own
        )
        self.outputs.append(run.output)
        # Kept for a post-mortem: the JSON report times every task (where a slow run spent it).
        record = self.tmp / "plays" / f"{len(self.outputs):02d}-{Path(playbook).stem}.out"
        record.parent.mkdir(mode=0o700, exist_ok=True)
        record.touch(mode=0o600)
        record.write_text(run.output, encoding="utf-8")
        return run

    def host_vars(self) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(self._host_vars_path().read_text(encoding="utf-8"))
        return data

    def set_host_vars(self, values: Mapping[str, Any]) -> None:
        """Write the box's host_vars (the inventory keeps them for every later run)."""
        self._host_vars_path().write_text(yaml.safe_dump(dict(values)), encoding="utf-8")

    def _host_vars_path(self) -> Path:
        return self.inventory / "host_vars" / f"{self.host}.yml"

    def unit(self, unit: str) -> dict[str, str]:
        lines = self.sh(
            f"systemctl show {unit} --property=ActiveState,UnitFileState,InvocationID,MainPID,Result"
        ).stdout.splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def get(self, url: str, key: str = "") -> tuple[int, Any]:
        """GET ``url`` from inside the container (the engines listen on its loopback)."""
        script = (
            "import json, sys, urllib.error, urllib.request\n"
            "request = urllib.request.Request(sys.argv[1])\n"
            "key = sys.stdin.read().strip()\n"
            "if key: request.add_header('Authorization', 'Bearer ' + key)\n"
            "try:\n"
            "    with urllib.request.urlopen(request, timeout=10) as answer:\n"
            "        print(answer.status); print(answer.read().decode())\n"
            "except urllib.error.HTTPError as error: print(error.code); print('null')\n"
            "except OSError as error: print(0); print(json.dumps(str(error)))\n"
        )
        # The key goes in on stdin: the process sampler would see it on a command line.
        out = self.sh(f"python3 -c {shlex.quote(script)} {shlex.quote(url)}", stdin=key).stdout
        status, _, body = out.partition("\n")
        try:
            return int(status), json.loads(body)
        except json.JSONDecodeError:
            return int(status), body.strip()

    @contextmanager
    def tunnel(self, port: int) -> Iterator[int]:
        """``ssh -L`` to ``port`` on the box's loopback, as docs/monitoring.md tells an operator
        to reach Prometheus: the same key and transport as Ansible's; the host port it listens on."""
        settings = yaml.safe_load((self.inventory / "hosts.yml").read_text(encoding="utf-8"))["llmrig"]["hosts"][
            self.host
        ]
        (local,) = free_ports()
        command = [
            "ssh",
            "-N",
            "-i",
            settings["ansible_ssh_private_key_file"],
            *shlex.split(settings["ansible_ssh_common_args"]),
        ]
        command += ["-o", "ExitOnForwardFailure=yes", "-L", f"127.0.0.1:{local}:127.0.0.1:{port}", f"root@{self.name}"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        up = False
        try:
            deadline = time.monotonic() + 30
            while not up and process.poll() is None and time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", local), timeout=1).close()
                    up = True
                except OSError:
                    time.sleep(0.2)
            if up:
                yield local
        finally:
            process.terminate()
            _, said = process.communicate(timeout=10)  # reaps ssh and closes its stderr pipe
        if not up:
            raise RuntimeError(f"ssh -L to port {port} did not come up: {said.decode(errors='replace')}")

    def journal(self, unit: str, since: str) -> str:
        return self.sh(f"journalctl --no-pager --output=cat -u {unit} --since '{since}'").stdout

    def now(self) -> str:
        return self.sh("date '+%Y-%m-%d %H:%M:%S'").stdout.strip()

    def host_port(self, port: int) -> int:
        """The host loopback port that ``port`` inside the box is published on."""
        out = subprocess.run(
            ["podman", "port", self.name, f"{port}/tcp"], capture_output=True, text=True, check=True
        ).stdout
        return int(out.strip().splitlines()[0].rsplit(":", 1)[1])


def rig_environment() -> dict[str, str]:
    """The test rig's environment (scripts/testrig env); a clear error when it is not set."""
    names = ("CONTAINERS_CONF", "LLMRIG_TESTRIG_IMAGE", "LLMRIG_WHEELHOUSE")
    missing = [name for name in names if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"{missing} unset: run through scripts/e2e or scripts/demo, which build the test rig")
    return {name: os.environ[name] for name in names}


def running(name: str) -> bool:
    done = subprocess.run(
        ["podman", "container", "inspect", "--format", "{{.State.Running}}", name],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0 and done.stdout.strip() == "true"


def address(name: str) -> str:
    """The container's address on the podman bridge (what another box and a firewall see)."""
    done = subprocess.run(
        ["podman", "container", "inspect", "--format", "{{.NetworkSettings.IPAddress}}", name],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def remove(name: str) -> None:
    # -t 0: the box is thrown away, no need to wait for a clean stop.
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, check=False)


def start(
    name: str,
    tmp: Path,
    *,
    host: str = HOST,
    mounts: Mapping[str, str] | None = None,
    writable_mounts: Mapping[str, str] | None = None,
    publish: Sequence[int] = (),
    publish_same: Sequence[int] = (),
    reuse: bool = False,
) -> Box:
    """A box named ``name`` (inventory host ``host``) with its inventory under ``tmp``: a fresh
    container, or with ``reuse`` the one already running under that name (and the inventory kept).
    Each port of ``publish`` is published on a free port of the host's loopback, each of
    ``publish_same`` on the same port number there (a URL that names its port, as the HTTPS
    site's does, is then the same inside and outside). ``mounts`` are read-only in the box,
    ``writable_mounts`` (a backup repository on the host) writable."""
    rig = rig_environment()
    tmp.mkdir(parents=True, exist_ok=True)
    inventory, artifacts = tmp / "inventory", tmp / "artifacts"
    the_box = Box(name, inventory, artifacts, tmp, host)
    if reuse and running(name) and (inventory / "hosts.yml").exists():
        return the_box
    remove(name)
    volumes = [arg for host, inside in {rig["LLMRIG_WHEELHOUSE"]: "/wheelhouse", **(mounts or {})}.items()
               for arg in ("-v", f"{host}:{inside}:ro")]  # fmt: skip
    volumes += [arg for host, inside in (writable_mounts or {}).items() for arg in ("-v", f"{host}:{inside}")]
    # A machine id of its own, as every installed system has: the image's is baked in, and two
    # boxes would share it (the backup tags each snapshot with the id of the box that took it).
    machine_id = tmp / "machine-id"
    machine_id.write_text(uuid.uuid4().hex + "\n", encoding="utf-8")
    volumes += ["-v", f"{machine_id}:/etc/machine-id:ro"]
    ports = [arg for port in publish for arg in ("-p", f"127.0.0.1::{port}")]
    ports += [arg for port in publish_same for arg in ("-p", f"127.0.0.1:{port}:{port}")]
    subprocess.run(
        [
            "podman", "run", "-d", "--name", name, "--hostname", name,
            # systemd's sandboxing (ProtectSystem, PrivateTmp, LoadCredential) needs mount namespaces.
            "--privileged", "--systemd=always", "--shm-size=1g", *volumes, *ports,
            rig["LLMRIG_TESTRIG_IMAGE"], "/sbin/init",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    key = tmp / "ssh_key"
    key.unlink(missing_ok=True)
    key.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    ssh_options = [
        f"-o ProxyCommand='podman exec -i {name} /usr/sbin/sshd -i'",
        "-o StrictHostKeyChecking=no",
        "-o UserKnownHostsFile=/dev/null",
        "-o LogLevel=ERROR",
    ]
    (inventory / "host_vars").mkdir(parents=True, exist_ok=True)
    settings = {
        "ansible_connection": "ansible.builtin.ssh",
        "ansible_host": name,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(key),
        "ansible_ssh_common_args": " ".join(ssh_options),
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump({"llmrig": {"hosts": {the_box.host: settings}}}), encoding="utf-8"
    )
    # systemd's own wait (start-up done, or failed units: degraded), bounded for a loaded machine.
    state = ""
    deadline = time.monotonic() + 600
    while state not in ("running", "degraded"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the container {name}'s systemd did not come up (last state: {state or 'none'})")
        state = the_box.sh("systemctl is-system-running --wait", check=False, timeout=620).stdout.strip()
        if state not in ("running", "degraded"):
            time.sleep(0.5)  # not up enough to answer yet (podman exec before PID 1 is ready)
    the_box.sh(
        "mkdir -p -m 0755 /run/sshd && install -d -m 0700 /root/.ssh"
        " && cat > /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys",
        stdin=key.with_suffix(".pub").read_text(encoding="utf-8"),
    )
    return the_box


def cpu_host_vars(box: Box) -> dict[str, Any]:
    """What every box of the tiers and the demo runs with: the cpu device, the tiny model,
    installs from the wheelhouse only, the artifacts under the box's own directory, and the API
    proxy on every interface at :data:`API_PORT`, in front of whichever engine serves on loopback."""
    return {
        "vllm_device": "cpu",
        "model": "gemma3-270m",
        "llmrig_pip_no_index": True,
        "llmrig_pip_find_links": ["/wheelhouse"],
        "llmrig_artifacts_dir": str(box.artifacts),
        "engine_health_timeout_s": 900,
        "vllm_limit_nofile": 16384,
        # The proxy on every interface of the box, so that its published port reaches it from the
        # host (the firewall admits the podman bridge, 10.88.0.0/16, as one of the default client
        # networks); vLLM stays on loopback, on a port of its own.
        "reverse_proxy_enabled": True,
        "reverse_proxy_port": API_PORT,
        "vllm_port": BOX_VLLM_PORT,
        # Ansible reaches the box through sshd in inetd mode (no TCP session to read the address
        # from), so the networks SSH may come from are named: the podman bridge.
        "llmrig_ssh_allowed_cidrs": ["10.88.0.0/16"],
        # The tiny base model answers readably at temperature 0 (with the preset's newline stop).
        "open_webui_default_model_params": {"temperature": 0},
        # Open WebUI's own port is the one published (open_webui_url): plain HTTP on every
        # interface, without the HTTPS site in front (docs/tls.md).
        "tls_enabled": False,
        "open_webui_host": "0.0.0.0",
    }


def published_webui_url(box: Box) -> str:
    """Open WebUI's URL at its port published on the host's loopback: a browser on the host
    reaches the UI there, so that is its open_webui_url (the one origin CORS then admits)."""
    return f"http://127.0.0.1:{box.host_port(8080)}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.box", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["up", "ports"])
    parser.add_argument("name")
    parser.add_argument("--dir", type=Path, required=True, help="where the inventory and artifacts live")
    parser.add_argument("--publish", type=int, action="append", default=[], help="a port inside the box")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.action == "up":
        reused = running(args.name) and (args.dir / "inventory" / "hosts.yml").exists()
        box = start(args.name, args.dir.resolve(), publish=args.publish, reuse=True)
        # A reused box keeps what its host_vars already say, and gains settings added since; the
        # engines' addresses and ports follow cpu_host_vars (an older demo put every engine on
        # 0.0.0.0:8000, where the proxy now listens).
        endpoint = {knob for engine in ENGINES for knob in (engine.host_knob, engine.port_knob)}
        kept = {knob: value for knob, value in (box.host_vars() if reused else {}).items() if knob not in endpoint}
        webui = {"open_webui_url": published_webui_url(box)} if 8080 in args.publish else {}
        box.set_host_vars({**cpu_host_vars(box), **webui, **kept})
        print(json.dumps({"reused": reused, "inventory": str(box.inventory)}))
        return 0
    box = Box(args.name, args.dir / "inventory", args.dir / "artifacts", args.dir)
    print(json.dumps({str(port): box.host_port(port) for port in args.publish}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
