"""What the client configurations say about the server, read from deployment.json and the preset:
the context each engine serves one request, the answer length, tool calls and reasoning, the URL
and the CA, the key's variable; bad records and flags named."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.rig import Deployment
from bench.rig.clients import KEY_ENV, PresetCapabilities, client_target, max_output
from bench.rig.clients.target import served_context
from tests.deployments import deployment

QWEN = PresetCapabilities("qwen3_coder", "qwen3", ())
BASE = PresetCapabilities("", "", ("\n",))
TOOLS = ["--tool-call-parser", "qwen3_coder", "--enable-auto-tool-choice", "--reasoning-parser", "qwen3"]


def _ollama(context: str) -> Deployment:
    return deployment("ollama", env={"OLLAMA_CONTEXT_LENGTH": context, "OLLAMA_HOST": "127.0.0.1:11434"})


@pytest.mark.parametrize(
    ("record", "context"),
    [
        (deployment("vllm", args=["--max-model-len", "65536"]), 65536),
        (deployment("vllm", args=["--max-model-len", "32k"]), 32000),  # as vLLM reads it
        (deployment("vllm", args=["--max_model_len=32K"]), 32768),
        (deployment("llamacpp", args=["--ctx-size", "8192", "--parallel", "4"]), 2048),  # a slot's share
        (deployment("llamacpp", args=["-c", "4096"]), 4096),
        (_ollama("16384"), 16384),
    ],
)
def test_the_context_one_request_may_use(record: Deployment, context: int) -> None:
    assert served_context(record) == context


@pytest.mark.parametrize(
    ("record", "named"),
    [
        (deployment("vllm", args=[]), "--max-model-len None"),
        (deployment("vllm", args=["--max-model-len", "auto"]), "--max-model-len 'auto'"),
        (deployment("llamacpp", args=["--parallel", "2"]), "llamacpp.args --ctx-size"),
        (deployment("llamacpp", args=["--ctx-size", "4096", "--parallel", "0"]), "llamacpp.args --parallel"),
        (deployment("ollama"), "OLLAMA_CONTEXT_LENGTH"),
    ],
)
def test_a_record_without_a_readable_context_is_named(record: Deployment, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")):
        served_context(record)


def test_answers_get_a_quarter_of_the_context_at_most_32768() -> None:
    assert [max_output(n) for n in (2048, 65536, 262144, 3)] == [512, 16384, 32768, 1]


def test_vllm_capabilities_come_from_its_command_line(tmp_path: Path) -> None:
    """vLLM's flags decide, whatever the preset says: a parser without auto tool choice returns no
    tool calls to a client that leaves tool_choice at auto."""
    full = client_target(deployment("vllm", args=["--max-model-len", "65536", *TOOLS]), BASE, artifacts=tmp_path)
    assert (full.tools, full.reasoning) == (True, True)
    no_auto = ["--max-model-len", "65536", "--tool-call-parser", "qwen3_coder"]
    bare = client_target(deployment("vllm", args=no_auto), QWEN, artifacts=tmp_path)
    assert (bare.tools, bare.reasoning) == (False, False)


def test_other_engines_take_the_presets_parsers(tmp_path: Path) -> None:
    args = ["--ctx-size", "8192"]
    assert client_target(deployment("llamacpp", args=args), QWEN, artifacts=tmp_path).tools
    base = client_target(deployment("llamacpp", args=args), BASE, artifacts=tmp_path)
    assert (base.tools, base.reasoning, base.stop) == (False, False, ("\n",))


def test_url_ca_and_key_as_clients_need_them(tmp_path: Path) -> None:
    record = deployment("vllm", args=["--max-model-len", "2048"], base_url="https://llm.lan:8443/v1/")
    without_ca = client_target(record, BASE, artifacts=tmp_path)
    assert (without_ca.base_url, without_ca.ca_file) == ("https://llm.lan:8443/v1", "")
    (tmp_path / "tls-root.crt").write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    target = client_target(record, BASE, artifacts=tmp_path)
    assert target.ca_file == str((tmp_path / "tls-root.crt").resolve())
    assert (target.key_env, target.key_file) == (KEY_ENV, str((tmp_path / "api_key").resolve()))
    plain = client_target(record, BASE, artifacts=tmp_path, base_url="http://10.0.0.5:8443/v1", key_env="TEAM_KEY")
    assert (plain.base_url, plain.ca_file, plain.key_env) == ("http://10.0.0.5:8443/v1", "", "TEAM_KEY")
    keyless = deployment("ollama", env={"OLLAMA_CONTEXT_LENGTH": "4096"})  # Ollama without the proxy: no key
    assert client_target(keyless, BASE, artifacts=tmp_path).key_env == ""


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"base_url": "ftp://llm.lan/v1"}, "--base-url: 'ftp://llm.lan/v1' is not an http"),
        ({"base_url": "llm.lan:8443/v1"}, "--base-url"),
        ({"key_env": "MY-KEY"}, "--key-env: 'MY-KEY' is not an environment variable name"),
    ],
)
def test_bad_flags_are_named(tmp_path: Path, changes: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        client_target(deployment("vllm", args=["--max-model-len", "2048"]), BASE, artifacts=tmp_path, **changes)
