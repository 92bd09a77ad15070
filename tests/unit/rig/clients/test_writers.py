"""The client writers: each file equals its golden file, parses as its format, and names the key's
variable without holding a key; the limits and capabilities reach each client's own keys."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from bench.rig.clients import CLIENT_NAMES, WRITERS, ClientTarget, hermes_compaction_at
from tests.unit.rig.clients.cases import CASES, GOLDEN


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_each_file_is_its_golden_file(case: str, client: str) -> None:
    """Byte for byte: a writer change is a diff of a golden file, reviewed."""
    files = WRITERS[client](CASES[case])
    assert files
    for name, text in files.items():
        assert text == (GOLDEN / case / name).read_text(encoding="utf-8"), f"{case}/{name}"


def test_the_golden_folders_hold_exactly_what_the_writers_write() -> None:
    for case, target in CASES.items():
        written = {name for writer in WRITERS.values() for name in writer(target)}
        on_disk = {str(path.relative_to(GOLDEN / case)) for path in (GOLDEN / case).rglob("*") if path.is_file()}
        assert on_disk == written, case


def _parsed(name: str, text: str) -> object:
    if name.endswith(".json"):
        return json.loads(text)
    if name.endswith((".yml", ".yaml")):
        return yaml.safe_load(text)
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_the_files_reference_the_key_variable_and_hold_no_key() -> None:
    target = replace(CASES["qwen-vllm-https"], key_env="TEAM_LLM_KEY")
    files = {name: text for writer in WRITERS.values() for name, text in writer(target).items()}
    assert json.loads(files["opencode.json"])["provider"]["llmrig"]["options"]["apiKey"] == "{env:TEAM_LLM_KEY}"
    assert yaml.safe_load(files["continue/config.yaml"])["models"][0]["apiKey"] == "${{ secrets.TEAM_LLM_KEY }}"
    assert yaml.safe_load(files["hermes/config.yaml"])["custom_providers"][0]["key_env"] == "TEAM_LLM_KEY"
    distribution = yaml.safe_load(files["hermes/profile/distribution.yaml"])
    assert distribution["env_requires"][0]["name"] == "TEAM_LLM_KEY"
    assert 'export OPENAI_API_KEY="$TEAM_LLM_KEY"' in files["openai.env"]
    assert "OPENAI_API_KEY" not in _parsed("openai.env", files["openai.env"])  # type: ignore[operator]
    assert all("api_key" not in text and "api-key" not in text for text in files.values())


def test_an_endpoint_without_a_key_gets_no_key_field() -> None:
    target = replace(CASES["gemma-llamacpp"], key_env="", key_file="")
    files = {name: text for writer in WRITERS.values() for name, text in writer(target).items()}
    assert "apiKey" not in json.loads(files["opencode.json"])["provider"]["llmrig"]["options"]
    assert "apiKey" not in yaml.safe_load(files["continue/config.yaml"])["models"][0]
    assert "key_env" not in yaml.safe_load(files["hermes/config.yaml"])["custom_providers"][0]
    assert yaml.safe_load(files["hermes/profile/distribution.yaml"])["env_requires"] == []
    assert "OPENAI_API_KEY" not in files["openai.env"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_limits_and_capabilities_reach_each_clients_own_keys(case: str) -> None:
    target: ClientTarget = CASES[case]
    files = {name: _parsed(name, text) for writer in WRITERS.values() for name, text in writer(target).items()}
    model = files["opencode.json"]["provider"]["llmrig"]["models"][target.served_name]  # type: ignore[index]
    assert model["limit"] == {"context": target.context, "output": target.max_output}
    assert (model["tool_call"], model["reasoning"], model["temperature"]) == (target.tools, target.reasoning, False)
    settings = files["aider/.aider.model.settings.yml"][0]  # type: ignore[index]
    assert settings["use_temperature"] is False
    assert settings["edit_format"] == ("diff" if target.tools else "whole")
    assert settings["extra_params"]["max_tokens"] == target.max_output
    assert settings["extra_params"].get("stop", []) == list(target.stop)
    metadata = files["aider/.aider.model.metadata.json"][f"openai/{target.served_name}"]  # type: ignore[index]
    assert (metadata["max_input_tokens"], metadata["max_output_tokens"]) == (target.context, target.max_output)
    entry = files["continue/config.yaml"]["models"][0]  # type: ignore[index]
    assert entry["defaultCompletionOptions"]["contextLength"] == target.context
    assert ("tool_use" in entry.get("capabilities", [])) == target.tools
    assert entry.get("requestOptions", {}).get("caBundlePath", "") == target.ca_file
    hermes = files["hermes/config.yaml"]
    assert hermes["model"]["context_length"] == target.context  # type: ignore[index]
    assert hermes["custom_providers"][0].get("ssl_ca_cert", "") == target.ca_file  # type: ignore[index]
    assert files["openai.env"].get("SSL_CERT_FILE", "") == target.ca_file  # type: ignore[union-attr]
    assert files["openai.env"]["OPENAI_BASE_URL"] == target.base_url  # type: ignore[index]


def test_hermes_compacts_by_its_own_formula() -> None:
    """max(int((context - max_tokens) * 0.75), 64000), or 85% of a window that floor reaches."""
    big = replace(CASES["qwen-vllm-https"], context=262144, max_output=32768)
    assert hermes_compaction_at(big) == int((262144 - 32768) * 0.75)
    assert hermes_compaction_at(CASES["qwen-vllm-https"]) == 64000
    assert hermes_compaction_at(replace(big, context=64000, max_output=16000)) == int(64000 * 0.85)
