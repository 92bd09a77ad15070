"""The Ollama protocol fake and the release archive it is packed in, as the role and bench meet them.

Real: build_release.py's archive bytes, the ``tar`` and ``zstd`` commands, the extracted script
run as its own process, HTTP over loopback, the ``openai`` client and bench's own Ollama
cross-check (bench.measure.telemetry.ollama). Fake: the Ollama server itself, tests/fakes/ollama/ollama, a protocol
fake; the real binary is verified on the GPU box by playbooks/verify.yml.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from bench.measure.telemetry import ollama
from tests.helpers import FAKES

BUILDER = FAKES / "ollama" / "build_release.py"
VERSIONS = ("0.32.15", "0.31.0")
ARCHIVE = "ollama-linux-amd64.tar.zst"
MODEL = "gemma3:270m"
MESSAGES = [{"role": "user", "content": "Say something short about loopback servers please"}]


def build(outdir: Path, *versions: str) -> None:
    """Run the builder as the role's tests do: a separate Python process."""
    subprocess.run([sys.executable, str(BUILDER), str(outdir), *versions], check=True, capture_output=True)


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A release tree for two versions, laid out like GitHub's release downloads."""
    outdir = tmp_path_factory.mktemp("releases")
    build(outdir, *VERSIONS)
    return outdir


@pytest.fixture(scope="module")
def extracted(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first version's archive unpacked by the real tar and zstd."""
    target = tmp_path_factory.mktemp("extracted")
    archive = release / f"v{VERSIONS[0]}" / ARCHIVE
    subprocess.run(["tar", "--use-compress-program=zstd", "-xf", str(archive), "-C", str(target)], check=True)
    return target


class FakeOllama:
    """``bin/ollama serve`` from the unpacked archive, on a free loopback port."""

    def __init__(self, binary: Path, tmp_path: Path, scheme: str = "") -> None:
        self.models = tmp_path / "models"
        self.log = tmp_path / "ollama.log"
        self.address = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.address}"
        env = {**os.environ, "OLLAMA_HOST": f"{scheme}{self.address}", "OLLAMA_MODELS": str(self.models)}
        env["OLLAMA_CONTEXT_LENGTH"] = "8192"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([str(binary), "serve"], env=env, stderr=log)
        try:
            self.wait_until_up()
        except AssertionError:
            self.kill()
            raise

    def wait_until_up(self, timeout_s: float = 5.0) -> None:
        """Poll ``GET /`` until it answers; fail with the log if the process dies first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text(encoding="utf-8")
            try:
                if httpx.get(self.url, timeout=1.0).text == "Ollama is running":
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"fake ollama did not answer within {timeout_s} s")

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """One POST with a JSON body."""
        return httpx.post(f"{self.url}{path}", json=body, timeout=10.0)

    def pull(self, model: str = MODEL) -> None:
        """Pull a model with ``stream: false``, as an Ansible uri task would."""
        assert self.post("/api/pull", {"model": model, "stream": False}).json() == {"status": "success"}

    def kill(self) -> None:
        """SIGKILL, if it still runs (the fixture's clean-up)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)

    def stop(self) -> int:
        """SIGTERM, as systemd stops the service; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=5)


@pytest.fixture
def server(extracted: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[FakeOllama]:
    """The fake serving from the unpacked archive; OLLAMA_HOST gets the scheme in ``param``, if any."""
    fake = FakeOllama(extracted / "bin" / "ollama", tmp_path, getattr(request, "param", ""))
    yield fake
    fake.kill()


def ndjson(response: httpx.Response) -> list[dict[str, Any]]:
    """The objects of a newline-delimited JSON answer."""
    return [json.loads(line) for line in response.text.splitlines() if line]


# The release archive ----------------------------------------------------------------------------


def test_sha256sum_matches_the_archive_in_githubs_format(release: Path) -> None:
    """Each version's sha256sum.txt is one ``<hex>  ./<archive>`` line for the archive's bytes."""
    for version in VERSIONS:
        folder = release / f"v{version}"
        digest = hashlib.sha256((folder / ARCHIVE).read_bytes()).hexdigest()
        assert (folder / "sha256sum.txt").read_text(encoding="utf-8") == f"{digest}  ./{ARCHIVE}\n"


def test_archive_lists_an_executable_bin_ollama_owned_by_root(release: Path) -> None:
    """The real tar lists the three members, root-owned, bin/ollama rwxr-xr-x."""
    archive = release / f"v{VERSIONS[0]}" / ARCHIVE
    listing = subprocess.run(
        ["tar", "--use-compress-program=zstd", "-tvf", str(archive)], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert [line.split()[-1] for line in listing] == [
        "bin/ollama",
        "lib/ollama/README.llmrig-fake",
        "lib/ollama/VERSION",
    ]
    assert listing[0].startswith("-rwxr-xr-x root/root ")
    assert all(line.split()[1] == "root/root" for line in listing)


def test_rebuilding_gives_identical_bytes(release: Path, tmp_path: Path) -> None:
    """Same version, same bytes; another version, other bytes."""
    build(tmp_path, VERSIONS[0])
    again = (tmp_path / f"v{VERSIONS[0]}" / ARCHIVE).read_bytes()
    assert again == (release / f"v{VERSIONS[0]}" / ARCHIVE).read_bytes()
    assert again != (release / f"v{VERSIONS[1]}" / ARCHIVE).read_bytes()


def test_extracted_binary_prints_its_version(extracted: Path) -> None:
    """``bin/ollama --version`` and ``-v`` without a server: the client version read from lib/ollama/VERSION."""
    env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{free_port()}")
    for flag in ("--version", "-v"):
        command = [str(extracted / "bin" / "ollama"), flag]
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
        assert done.stdout == (
            f"Warning: could not connect to a running Ollama instance\nWarning: client version is {VERSIONS[0]}\n"
        )


def test_version_names_the_running_server_and_the_client(extracted: Path, server: FakeOllama) -> None:
    """With a server of the same version only its version; the role parses the client's either way."""
    env = dict(os.environ, OLLAMA_HOST=server.address)
    command = [str(extracted / "bin" / "ollama"), "--version"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    assert done.stdout == f"ollama version is {VERSIONS[0]}\n"


# The server ------------------------------------------------------------------------------------


def test_serve_logs_its_settings_and_answers_the_root(server: FakeOllama) -> None:
    """The start line names the version, address and settings; / and /api/version answer."""
    first = server.log.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(f"llmrig protocol fake of ollama {VERSIONS[0]} listening on {server.address} ")
    assert f"OLLAMA_MODELS={server.models}" in first
    assert "OLLAMA_CONTEXT_LENGTH=8192" in first
    assert httpx.head(server.url).status_code == 200
    assert httpx.get(f"{server.url}/api/version").json() == {"version": VERSIONS[0]}
    missing = httpx.get(f"{server.url}/api/nothing")
    assert (missing.status_code, missing.text) == (404, "404 page not found")


@pytest.mark.parametrize("server", ["http://"], indirect=True)
def test_ollama_host_may_carry_a_scheme(server: FakeOllama) -> None:
    """OLLAMA_HOST=http://host:port is read as host:port."""
    assert f"listening on {server.address} " in server.log.read_text(encoding="utf-8")


def test_streamed_pull_writes_manifest_and_blob(server: FakeOllama) -> None:
    """Empty tags, then a streamed pull ends in success and leaves Ollama's store layout."""
    assert httpx.get(f"{server.url}/api/tags").json() == {"models": []}
    events = ndjson(server.post("/api/pull", {"model": MODEL}))
    statuses = [event["status"] for event in events]
    assert statuses[0] == "pulling manifest"
    assert statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    manifest = json.loads((server.models / "manifests/registry.ollama.ai/library/gemma3/270m").read_bytes())
    layer = manifest["layers"][0]
    blob = (server.models / "blobs" / layer["digest"].replace(":", "-")).read_bytes()
    assert layer["digest"] == f"sha256:{hashlib.sha256(blob).hexdigest()}"
    assert layer["size"] == len(blob) == events[-4]["total"] == events[-4]["completed"]
    tags = httpx.get(f"{server.url}/api/tags").json()["models"]
    assert [(t["name"], t["size"]) for t in tags] == [(MODEL, len(blob))]


def test_pulling_a_model_the_registry_lacks_fails(server: FakeOllama) -> None:
    """``stream: false`` gets 500 with the registry's error; a streamed pull ends with it."""
    answer = server.post("/api/pull", {"model": "missing:1b", "stream": False})
    assert answer.status_code == 500
    assert answer.json() == {"error": "pull model manifest: file does not exist"}
    assert ndjson(server.post("/api/pull", {"name": "missing:1b"}))[-1] == answer.json()
    assert not (server.models / "manifests" / "registry.ollama.ai").exists()


def test_show_needs_a_pulled_model(server: FakeOllama) -> None:
    """/api/show: 404 before the pull, the model's details after."""
    before = server.post("/api/show", {"model": MODEL})
    assert (before.status_code, before.json()) == (404, {"error": f"model '{MODEL}' not found"})
    server.pull()
    shown = server.post("/api/show", {"model": MODEL}).json()
    assert shown["details"]["family"] == "gemma3"
    assert shown["model_info"]["gemma3.context_length"] == 32768


def test_openai_client_streams_text_and_usage(server: FakeOllama) -> None:
    """The openai client's stream: one word per chunk up to max_tokens, then the usage."""
    server.pull()
    with OpenAI(base_url=f"{server.url}/v1", api_key="ignored") as client:
        assert [m.id for m in client.models.list()] == [MODEL]
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}, max_tokens=5
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 5
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.completion_tokens, chunks[-1].usage.prompt_tokens) == (5, 7)


def test_native_chat_reports_nanosecond_timings(server: FakeOllama) -> None:
    """Non-streamed /api/chat: eval_count is the reply's words, durations are real ns; /api/ps shows it."""
    assert server.post("/api/chat", {"model": MODEL, "messages": MESSAGES}).status_code == 404
    server.pull()
    answer = server.post("/api/chat", {"model": MODEL, "messages": MESSAGES, "stream": False}).json()
    assert answer["done"] is True
    assert answer["eval_count"] == len(answer["message"]["content"].split()) == 16
    assert answer["prompt_eval_count"] == 7
    assert answer["eval_duration"] >= 16 * 1_000_000  # a few ms per token, in nanoseconds
    assert answer["total_duration"] >= answer["load_duration"] + answer["eval_duration"]
    loaded = httpx.get(f"{server.url}/api/ps").json()["models"]
    assert [(m["name"], m["context_length"]) for m in loaded] == [(MODEL, 8192)]


def test_native_chat_streams_one_word_per_chunk(server: FakeOllama) -> None:
    """Streamed /api/chat: num_predict words, one per chunk, then the final object with the timings."""
    server.pull()
    chunks = ndjson(server.post("/api/chat", {"model": MODEL, "messages": MESSAGES, "options": {"num_predict": 3}}))
    assert [len(c["message"]["content"].split()) for c in chunks] == [1, 1, 1, 0]
    assert [c["done"] for c in chunks] == [False, False, False, True]
    assert (chunks[-1]["done_reason"], chunks[-1]["eval_count"]) == ("length", 3)


def test_sigterm_stops_serve_with_exit_code_0(server: FakeOllama) -> None:
    """systemd's stop: SIGTERM, and the process exits 0."""
    assert server.stop() == 0


# bench's Ollama cross-check against the fake ---------------------------------------------------


async def _bench_cross_check(url: str) -> tuple[bool, bool, ollama.NativeTimings | None, list[ollama.NativeTimings]]:
    """The cross-check calls of bench.measure.telemetry.ollama: is_ollama on the root and on /v1, native_chat."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        root, not_root = await ollama.is_ollama(http, url), await ollama.is_ollama(http, f"{url}/v1")
        missing = await ollama.native_chat(http, url, "absent:1b", MESSAGES, 8)
        answers = [await ollama.native_chat(http, url, MODEL, MESSAGES, 8) for _ in range(ollama.CROSS_CHECK_REQUESTS)]
    return root, not_root, missing, [a for a in answers if a is not None]


def test_bench_cross_check_reads_the_fakes_timings(server: FakeOllama) -> None:
    """bench recognises the fake as Ollama and computes a plausible server-side decode speed."""
    server.pull()
    root, not_root, missing, answers = asyncio.run(_bench_cross_check(server.url))
    assert (root, not_root, missing) == (True, False, None)
    assert [a.eval_count for a in answers] == [8, 8, 8]
    assert all(a.eval_duration_ns > 0 and a.prompt_eval_count > 0 for a in answers)
    check = ollama.cross_check(answers, client_decode_tps_p50=None)
    assert check.requests == 3
    assert check.warnings == []
    assert 10 < check.server_decode_tps_p50 <= 500  # one token per >= 2 ms
