"""The gateway (roles/gateway): the real vLLM Router, started with the command line the role
renders through real Ansible, behind the real Caddy serving the reverse_proxy role's Caddyfile
with the gateway's front (the API key checked there), in front of two real llama.cpp servers
that stand for two engine boxes. Box A runs on core 0 (with bench, Caddy and the router, which
mostly wait), box B on core 1, so two boxes have twice the compute of one, as two machines do.

What is proven here, on loopback: bench through the front at 1 and 4 streams, each level's share
per box recorded from the router's counts; 4 streams over both boxes give more output than box A
alone in the same test; a conversation's turns land on one box (the router's own per-backend
request counter, read around each request), and that saves evaluating the history again against
round robin (the boxes' own counts of evaluated prompt tokens). Failover (a box's engine killed
in the middle of a run) is proven end to end, under each box's real systemd and watchdog, by
tests/e2e/test_gateway_group.py. What only two real boxes show: docs/gateway.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.test_reverse_proxy import _caddy
from tests.ansible.test_reverse_proxy import _render as _render_caddyfile
from tests.helpers import BIN, REPO, chat, playbook_dump
from tests.integration.test_real_engines import KEY, Server, _free_port, start_llamacpp
from tests.result_files import load_result

pytestmark = pytest.mark.integration
ROUTER = REPO / "build" / "testrig" / "router" / "bin" / "vllm-router"
PROCESSED = re.compile(r'^vllm_router_processed_requests_total\{worker="([^"]+)"\} (\d+)', re.MULTILINE)


@dataclass
class Group:
    """Two boxes (A on core 0, B on core 1) behind the router (``router_url``, loopback) behind
    the front (``url``, the API key)."""

    boxes: dict[str, Server]
    ports: dict[str, int]
    router: subprocess.Popen[bytes]
    url: str
    router_url: str
    metrics_url: str
    folder: Path

    def box_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def processed(self) -> dict[str, int]:
        """The router's count of requests each box served, by box name."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text = response.read().decode()
        by_url = {url: int(count) for url, count in PROCESSED.findall(text)}
        return {name: by_url.get(self.box_url(name), 0) for name in self.ports}

    def healthy(self) -> dict[str, bool]:
        """The router's view of each box, from its /workers."""
        with urllib.request.urlopen(f"{self.router_url}/workers", timeout=5) as response:
            workers = json.load(response)["workers"]
        by_url = {worker["url"]: worker["is_healthy"] for worker in workers}
        return {name: by_url[self.box_url(name)] for name in self.ports}


def _render(tmp_path: Path, backends: list[str], port: int, metrics_port: int, **knobs: Any) -> dict[str, Any]:
    knobs |= {"gateway_backends": backends, "gateway_port": port, "gateway_metrics_port": metrics_port}
    return playbook_dump("tests/ansible/render_gateway_args.yml", "args_dump", knobs, tmp_path=tmp_path)


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Seconds until ``condition`` held, polled every 0.2 s; fails after ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if condition():
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s} s")


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    folder = tmp_path_factory.mktemp("gateway")
    ports = {"A": _free_port(), "B": _free_port()}
    boxes = {
        "A": start_llamacpp(folder / "A.log", port=ports["A"], core=0),
        "B": start_llamacpp(folder / "B.log", port=ports["B"], core=1),
    }
    port, metrics_port = _free_port(), _free_port()
    rendered = _render(folder, [f"http://127.0.0.1:{ports[name]}" for name in ("A", "B")], port, metrics_port)
    args: list[str] = rendered["args"]
    assert ROUTER.exists(), f"{ROUTER} missing: run scripts/testrig router (scripts/test does)"
    with (folder / "router.log").open("wb") as sink:
        router = subprocess.Popen(["taskset", "-c", "0", str(ROUTER), *args], stdout=sink, stderr=sink)
    proxy_port, front_port = _free_port(), _free_port()
    front = {"_reverse_proxy_gateway": True, "gateway_front_port": front_port}
    front |= {"gateway_port": port, "gateway_metrics_port": metrics_port}
    caddyfile = folder / "caddy" / "Caddyfile"
    caddyfile.parent.mkdir()
    caddyfile.write_text(
        _render_caddyfile("Caddyfile.j2", proxy_port, f"127.0.0.1:{ports['A']}", extra=front), encoding="utf-8"
    )
    group = Group(
        boxes, ports, router, f"http://127.0.0.1:{front_port}", f"http://127.0.0.1:{port}",
        f"http://127.0.0.1:{metrics_port}/metrics",
        folder,
    )  # fmt: skip
    try:
        with _caddy(caddyfile, front_port, KEY):
            _wait(lambda: all(group.healthy().values()), 30, "the router up with both boxes healthy")
            yield group
    finally:
        router.terminate()
        router.wait(timeout=10)
        for box in group.boxes.values():
            box.stop()


def _bench(base_url: str, results: Path, *args: str, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """`bench run sweep` pinned to core 0, as a user runs it; the result document."""
    command = ["taskset", "-c", "0", str(BIN / "bench"), "run", "sweep", *args, "--base-url", f"{base_url}/v1"]
    command += ["--api-key", KEY, "--tag", "gateway", "--results-dir", str(results)]
    command += ["--input-tokens", "64", "--output-tokens", "32"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    assert done.returncode in ok, done.stdout + done.stderr
    (path,) = (results / "gateway").glob("*.json")
    return load_result(path)


def _chat(url: str, messages: list[dict[str, str]]) -> str:
    return chat(url, KEY, messages)


def _served_by(group: Group, send: Callable[[], object]) -> str:
    """The box that served the one request ``send`` makes (nothing else runs meanwhile)."""
    before = group.processed()
    send()
    after = group.processed()
    (box,) = [name for name in after if after[name] > before[name]]
    return box


def test_four_streams_over_two_boxes_give_more_than_one_box(group: Group, tmp_path: Path) -> None:
    """bench through the front at 1 and 4 streams completes without errors and records each
    level's share per box, as the router counted it (its warm-up requests too); at 4 streams the
    two boxes (two cores) give at least 1.3x the output of box A alone (about 2x is expected: the
    ratio needs neither a quiet machine nor a tight bound), and both boxes served."""
    alone = _bench(group.box_url("A"), tmp_path / "alone", "--concurrency", "4", "--requests", "16")
    before = group.processed()
    through = _bench(group.url, tmp_path / "gateway", "--concurrency", "1", "4", "--requests", "16")
    after = group.processed()
    for level in [*alone["levels"], *through["levels"]]:
        assert level["requests"]["errored"] == 0
    one_box = alone["levels"][0]["throughput"]["output_tps"]
    two_boxes = through["levels"][1]["throughput"]["output_tps"]
    print(f"output at 4 streams: box A alone {one_box:.1f} tok/s, both boxes {two_boxes:.1f} tok/s")
    print(f"served: {before} -> {after}")
    assert two_boxes > 1.3 * one_box
    assert all(after[name] > before[name] for name in after), (before, after)
    urls = {group.box_url(name) for name in group.ports}
    for level in through["levels"]:
        shares = level["server"]["backends"]
        assert set(shares) <= urls
        assert sum(shares.values()) == level["requests"]["total"]
    assert alone["levels"][0]["server"].get("backends") is None  # one box: no router to say


def test_a_conversations_turns_land_on_one_box(group: Group) -> None:
    """Four conversations of three turns each, every turn resending the history as agents do:
    the router sends every turn of a conversation to the box that served its first (its prefix
    is cached there)."""
    boxes: dict[str, list[str]] = {}
    for topic in ("volcanoes", "sailing ships", "bread baking", "chess openings"):
        history = [{"role": "user", "content": f"{topic}: tell me one fact about {topic}."}]
        for turn in range(3):
            answer: list[str] = []
            box = _served_by(group, lambda: answer.append(_chat(group.url, history)))  # noqa: B023
            boxes.setdefault(topic, []).append(box)
            history += [
                {"role": "assistant", "content": answer[0]},
                {"role": "user", "content": f"And fact {turn + 2}?"},
            ]
    assert all(len(set(turns)) == 1 for turns in boxes.values()), boxes


# The opening of each conversation: long enough (about 300 tokens) that evaluating it again on
# the other box costs far more than a turn's new tokens.
OPENING = " ".join(f"Note {n}: the agent keeps its working notes in this long system prompt." for n in range(25))
TOPICS = ("volcanoes", "sailing ships", "bread baking", "chess openings")
PROMPT_TOKENS = re.compile(r"^llamacpp:prompt_tokens_total (\S+)$", re.MULTILINE)


def _evaluated(group: Group) -> int:
    """Prompt tokens both boxes evaluated so far (llama.cpp's count: a cached prefix is not evaluated)."""
    total = 0
    for name in group.ports:
        request = urllib.request.Request(f"{group.box_url(name)}/metrics", headers={"Authorization": f"Bearer {KEY}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            found = PROMPT_TOKENS.search(response.read().decode())
        assert found is not None
        total += int(float(found.group(1)))
    return total


def _answers(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bool(response.status == 200)


def _conversations(url: str, salt: str) -> None:
    """The four conversations of three turns, in order, each opening with ``salt`` (so that no run
    finds another run's prompts cached)."""
    for topic in TOPICS:
        history = [{"role": "user", "content": f"{salt}. {OPENING} Now: one fact about {topic}."}]
        for turn in range(3):
            answer = _chat(url, history)
            history += [{"role": "assistant", "content": answer}, {"role": "user", "content": f"Fact {turn + 2}?"}]


def test_affinity_saves_evaluating_the_history_again(group: Group, tmp_path: Path) -> None:
    """The difference affinity makes, measured: the same conversations through the gateway
    (cache_aware) and through a second router the role renders with gateway_policy round_robin,
    in front of the same boxes. Round robin sends a conversation's next turn to the other box,
    which evaluates the whole history again; with affinity the box that has it cached evaluates
    only the new turn. The boxes' own counts of evaluated prompt tokens must show it: fewer than
    two thirds of round robin's. Measured: about half (2,156 against 4,088 tokens); not less,
    because the four conversations share their long opening, as agents share a system prompt, so
    the router keeps all four on one box, whose two slots hold two of them at a time."""
    before = _evaluated(group)
    _conversations(group.url, "Alpha")
    affinity = _evaluated(group) - before
    port, metrics_port = _free_port(), _free_port()
    urls = [group.box_url(name) for name in ("A", "B")]
    rendered = _render(tmp_path, urls, port, metrics_port, gateway_policy="round_robin")
    with (tmp_path / "round-robin.log").open("wb") as sink:
        router = subprocess.Popen(["taskset", "-c", "0", str(ROUTER), *rendered["args"]], stdout=sink, stderr=sink)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait(lambda: _answers(f"{url}/readiness"), 30, "the second router")
        before = _evaluated(group)
        _conversations(url, "Beta")
        round_robin = _evaluated(group) - before
    finally:
        router.terminate()
        router.wait(timeout=10)
    print(f"prompt tokens evaluated: {affinity} with affinity, {round_robin} round robin")
    assert affinity < round_robin * 2 / 3
