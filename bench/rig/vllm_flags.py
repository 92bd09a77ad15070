"""The vLLM command line and service environment, rendered from the knobs in one place.

The ``vllm`` role writes both into ``/etc/llmrig/vllm.env`` (mode 0600) through the llmrig
filter plugin; the unit's ``ExecStart`` expands ``$VLLM_ARGS``. systemd splits that variable at
whitespace and does not honour quotes inside it, so no argument may contain whitespace: JSON
values are rendered compactly, and anything else with a space is refused with the variable
to fix. The API key never appears here; it travels as ``VLLM_API_KEY``, which vLLM reads when
``--api-key`` is absent, so it is not visible in ``ps`` or in the journal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from bench.errors import ConfigError
from bench.rig.argv import flag_name
from bench.rig.values import truthy

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An environment variable whose name contains one of these words is taken for a credential:
# deployment.json (mode 0644, fetched to the controller) records its name, never its value.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH", re.IGNORECASE)


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class _Argv:
    """An argument list that remembers which knob produced each argument, for error messages."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.owners: dict[str, str] = {}  # flag -> the knob that produced it

    def add(self, variable: str, *values: Any) -> None:
        for value in values:
            text = str(value)
            if not text or re.search(r"\s", text):
                raise ConfigError(
                    f"{variable}: vLLM argument {text!r} is empty or holds whitespace, which systemd would split"
                )
            if text.startswith("--"):
                self.owners.setdefault(text, variable)
            self.args.append(text)


def _gpu_args(argv: _Argv, knobs: Mapping[str, Any]) -> None:
    """Flags that only mean something with CUDA GPUs; the cpu device drops them."""
    argv.add("vllm_gpu_memory_utilization", "--gpu-memory-utilization", knobs["vllm_gpu_memory_utilization"])
    if str(knobs["vllm_kv_cache_memory_bytes"]):
        argv.add("vllm_kv_cache_memory_bytes", "--kv-cache-memory-bytes", knobs["vllm_kv_cache_memory_bytes"])
    if truthy(knobs["vllm_disable_custom_all_reduce"]):
        argv.add("vllm_disable_custom_all_reduce", "--disable-custom-all-reduce")


def _engine_args(argv: _Argv, knobs: Mapping[str, Any]) -> None:
    """KV cache, attention, quantization and execution-mode flags."""
    if str(knobs["vllm_kv_cache_dtype"]) != "auto":
        argv.add("vllm_kv_cache_dtype", "--kv-cache-dtype", knobs["vllm_kv_cache_dtype"])
    if str(knobs["vllm_attention_backend"]):
        argv.add("vllm_attention_backend", "--attention-backend", knobs["vllm_attention_backend"])
    if str(knobs["vllm_quantization"]) != "auto":
        argv.add("vllm_quantization", "--quantization", knobs["vllm_quantization"])
    if truthy(knobs["vllm_enforce_eager"]):
        argv.add("vllm_enforce_eager", "--enforce-eager")
    prefix = "--enable-prefix-caching" if truthy(knobs["vllm_enable_prefix_caching"]) else "--no-enable-prefix-caching"
    argv.add("vllm_enable_prefix_caching", prefix)
    if truthy(knobs["vllm_language_model_only"]):
        argv.add("vllm_language_model_only", "--language-model-only")


def _frontend_args(argv: _Argv, knobs: Mapping[str, Any], chat_template_path: str) -> None:
    """Tool calling, reasoning and chat template flags."""
    if str(knobs["vllm_tool_call_parser"]):
        argv.add("vllm_tool_call_parser", "--tool-call-parser", knobs["vllm_tool_call_parser"])
        if truthy(knobs["vllm_enable_auto_tool_choice"]):
            argv.add("vllm_enable_auto_tool_choice", "--enable-auto-tool-choice")
    if str(knobs["vllm_reasoning_parser"]):
        argv.add("vllm_reasoning_parser", "--reasoning-parser", knobs["vllm_reasoning_parser"])
    if chat_template_path:
        argv.add("vllm_chat_template", "--chat-template", chat_template_path)
    if knobs["vllm_default_chat_template_kwargs"]:
        kwargs = _compact_json(knobs["vllm_default_chat_template_kwargs"])
        argv.add("vllm_default_chat_template_kwargs", "--default-chat-template-kwargs", kwargs)


# The flags a knob sets, so that vllm_extra_args cannot set them behind the rules' back (the
# context and KV-plan rules read the knobs). tests/unit/rig/test_vllm_flags.py renders every flag
# serve_args can write and checks this table against the knob that wrote it.
OWNED_FLAGS: Mapping[str, str] = {
    "--model": "model",
    "--served-model-name": "vllm_served_model_name",
    "--host": "vllm_host",
    "--port": "vllm_port",
    "--max-model-len": "vllm_max_model_len",
    "--max-num-seqs": "vllm_max_num_seqs",
    "--max-num-batched-tokens": "vllm_max_num_batched_tokens",
    "--tensor-parallel-size": "vllm_tensor_parallel_size",
    "-tp": "vllm_tensor_parallel_size",
    "--pipeline-parallel-size": "vllm_pipeline_parallel_size",
    "-pp": "vllm_pipeline_parallel_size",
    "--gpu-memory-utilization": "vllm_gpu_memory_utilization",
    "--kv-cache-memory-bytes": "vllm_kv_cache_memory_bytes",
    "--disable-custom-all-reduce": "vllm_disable_custom_all_reduce",
    "--kv-cache-dtype": "vllm_kv_cache_dtype",
    "--attention-backend": "vllm_attention_backend",
    "--quantization": "vllm_quantization",
    "-q": "vllm_quantization",
    "--enforce-eager": "vllm_enforce_eager",
    "--enable-prefix-caching": "vllm_enable_prefix_caching",
    "--no-enable-prefix-caching": "vllm_enable_prefix_caching",
    "--language-model-only": "vllm_language_model_only",
    "--tool-call-parser": "vllm_tool_call_parser",
    "--enable-auto-tool-choice": "vllm_enable_auto_tool_choice",
    "--reasoning-parser": "vllm_reasoning_parser",
    "--chat-template": "vllm_chat_template",
    "--default-chat-template-kwargs": "vllm_default_chat_template_kwargs",
    "--speculative-config": "vllm_mtp",
    "--enable-per-request-metrics": "vllm_per_request_metrics",
    "--per-request-spec-decode-metrics": "vllm_per_request_metrics",
    "--hf-overrides": "vllm_rope_override",
}


def owned_flag(arg: str) -> str | None:
    """The knob that owns the flag ``arg`` (``--max_model_len=4096`` counts as ``--max-model-len``,
    as :func:`bench.rig.argv.flag_name` spells it), or None for a flag no knob sets."""
    return OWNED_FLAGS.get(flag_name(arg) or "")


def serve_args(knobs: Mapping[str, Any], *, device: str, model_path: str, chat_template_path: str) -> list[str]:
    """Every ``vllm serve`` argument for the resolved knobs, in a stable order.

    ``model_path`` is the local directory the role downloaded or converted; ``chat_template_path``
    is the bundled template file when the preset asks for one ('' otherwise).
    """
    return _render(knobs, device=device, model_path=model_path, chat_template_path=chat_template_path).args


def flag_owners(knobs: Mapping[str, Any], *, device: str) -> dict[str, str]:
    """Flag to the knob that wrote it, for the knobs given (the test of :data:`OWNED_FLAGS`)."""
    return _render(knobs, device=device, model_path="/m", chat_template_path="/t").owners


def _render(knobs: Mapping[str, Any], *, device: str, model_path: str, chat_template_path: str) -> _Argv:
    argv = _Argv()
    argv.add("llmrig_models_dir", "--model", model_path)
    argv.add("vllm_served_model_name", "--served-model-name", knobs["vllm_served_model_name"])
    argv.add("vllm_host", "--host", knobs["vllm_host"])
    argv.add("vllm_port", "--port", knobs["vllm_port"])
    argv.add("vllm_max_model_len", "--max-model-len", knobs["vllm_max_model_len"])
    argv.add("vllm_max_num_seqs", "--max-num-seqs", knobs["vllm_max_num_seqs"])
    argv.add("vllm_max_num_batched_tokens", "--max-num-batched-tokens", knobs["vllm_max_num_batched_tokens"])
    argv.add("vllm_tensor_parallel_size", "--tensor-parallel-size", knobs["vllm_tensor_parallel_size"])
    if int(knobs["vllm_pipeline_parallel_size"]) > 1:
        argv.add("vllm_pipeline_parallel_size", "--pipeline-parallel-size", knobs["vllm_pipeline_parallel_size"])
    if device == "cuda":
        _gpu_args(argv, knobs)
    _engine_args(argv, knobs)
    _frontend_args(argv, knobs, chat_template_path)
    if truthy(knobs["vllm_mtp"]):
        spec = {"method": "mtp", "num_speculative_tokens": int(knobs["vllm_mtp_tokens"])}
        argv.add("vllm_mtp", "--speculative-config", _compact_json(spec))
    if truthy(knobs["vllm_per_request_metrics"]):
        argv.add("vllm_per_request_metrics", "--enable-per-request-metrics")
        if truthy(knobs["vllm_mtp"]):
            argv.add("vllm_per_request_metrics", "--per-request-spec-decode-metrics", "summary")
    if knobs["vllm_rope_override"]:
        argv.add("vllm_rope_override", "--hf-overrides", _compact_json(knobs["vllm_rope_override"]))
    # The watchdog and bench poll these; one access-log line per poll would drown the journal.
    argv.add("vllm_extra_args", "--disable-access-log-for-endpoints", "/health,/metrics")
    argv.add("vllm_extra_args", *knobs["vllm_extra_args"])
    return argv


def service_env(
    knobs: Mapping[str, Any], *, device: str, args: list[str], cache_dir: str, api_key: str
) -> dict[str, str]:
    """The environment of the vLLM unit: the command line, the key, caches and device switches."""
    env = {
        "VLLM_ARGS": " ".join(args),
        "VLLM_API_KEY": api_key,
        # The model is a local directory fetched before the unit starts: never reach the hub.
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": f"{cache_dir}/huggingface",
        "VLLM_CACHE_ROOT": cache_dir,
        "XDG_CACHE_HOME": cache_dir,
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_DO_NOT_TRACK": "1",
        # The unit allows packets to and from loopback only (IPAddressAllow=): the ranks of
        # this one box bootstrap over lo, not over the first LAN interface NCCL and Gloo pick.
        "NCCL_SOCKET_IFNAME": "lo",
        "GLOO_SOCKET_IFNAME": "lo",
    }
    if device == "cuda":
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if truthy(knobs["vllm_flashinfer_workaround"]):
            env["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
    else:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(knobs["vllm_cpu_kvcache_space_gib"])
    for name, value in dict(knobs["vllm_extra_env"]).items():
        if not ENV_NAME.match(str(name)):
            raise ConfigError(f"vllm_extra_env: {name!r} is not a valid environment variable name")
        env[str(name)] = str(value)
    return env


def public_env(env: Mapping[str, str]) -> dict[str, Any]:
    """What deployment.json records of the unit's environment: ``env``, the values of the
    variables that are not credentials, and ``secret_names``, the names only of those that look
    like one (:data:`SECRET_NAME`). ``VLLM_ARGS`` is left out: deployment.json has the args."""
    shown = {name: value for name, value in env.items() if name != "VLLM_ARGS" and not SECRET_NAME.search(name)}
    return {"env": shown, "secret_names": sorted(name for name in env if SECRET_NAME.search(name))}


def env_file(env: Mapping[str, str]) -> str:
    """``KEY="value"`` lines in systemd's EnvironmentFile syntax, sorted, one variable a line."""
    lines = []
    for name in sorted(env):
        value = env[name]
        if "\n" in value or "\r" in value:
            raise ConfigError(f"{name}: a service environment value cannot hold a line break")
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'{name}="{escaped}"')
    return "\n".join(lines) + "\n"
