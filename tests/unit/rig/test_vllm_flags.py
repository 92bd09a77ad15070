"""bench.rig.vllm_flags: the vLLM command line and unit environment rendered from the knobs."""

from __future__ import annotations

from typing import Any

import pytest

from bench.errors import ConfigError
from bench.rig.vllm_flags import OWNED_FLAGS, env_file, flag_owners, owned_flag, public_env, serve_args, service_env

MODEL = "/srv/llmrig/models/hf/org--model/abc"


def _args(knobs: dict[str, Any], device: str = "cuda", **changes: Any) -> list[str]:
    return serve_args({**knobs, **changes}, device=device, model_path=MODEL, chat_template_path="")


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_gpu_defaults_render_the_blackwell_recipe(rendered_gpu: dict[str, Any]) -> None:
    """On the two-GPU box the defaults give TP 2, fp8 KV, Triton attention, eager, no custom all-reduce."""
    args = _args(rendered_gpu["knobs"])
    assert _value(args, "--tensor-parallel-size") == "2"
    assert _value(args, "--kv-cache-dtype") == "fp8"
    assert _value(args, "--attention-backend") == "TRITON_ATTN"
    assert _value(args, "--max-num-batched-tokens") == "4096"
    assert _value(args, "--gpu-memory-utilization") == "0.9"
    assert _value(args, "--tool-call-parser") == "qwen3_coder"
    assert _value(args, "--reasoning-parser") == "qwen3"
    assert _value(args, "--model") == MODEL
    for flag in (
        "--enforce-eager",
        "--disable-custom-all-reduce",
        "--language-model-only",
        "--enable-auto-tool-choice",
    ):
        assert flag in args
    assert "--speculative-config" not in args
    assert "--quantization" not in args  # auto: vLLM reads compressed-tensors from config.json
    assert not any("api-key" in arg for arg in args)


def test_mtp_renders_compact_speculative_config(rendered_gpu: dict[str, Any]) -> None:
    """vllm_mtp adds --speculative-config with method mtp and vllm_mtp_tokens, without spaces."""
    args = _args(rendered_gpu["knobs"], vllm_mtp=True, vllm_mtp_tokens=2)
    assert _value(args, "--speculative-config") == '{"method":"mtp","num_speculative_tokens":2}'


def test_per_request_metrics_and_their_spec_decode_part(rendered_gpu: dict[str, Any]) -> None:
    """vllm_per_request_metrics (on by default) renders --enable-per-request-metrics, and with MTP on
    --per-request-spec-decode-metrics summary (vLLM only fills it where drafts are made); off, neither."""
    knobs = rendered_gpu["knobs"]
    assert knobs["vllm_per_request_metrics"] is True
    plain = _args(knobs)
    assert "--enable-per-request-metrics" in plain
    assert "--per-request-spec-decode-metrics" not in plain
    assert _value(_args(knobs, vllm_mtp=True), "--per-request-spec-decode-metrics") == "summary"
    off = _args(knobs, vllm_mtp=True, vllm_per_request_metrics=False)
    assert not any("per-request" in arg for arg in off)
    assert flag_owners({**knobs, "vllm_mtp": True}, device="cuda")["--per-request-spec-decode-metrics"] == (
        "vllm_per_request_metrics"
    )


def test_cpu_drops_gpu_only_flags(rendered_cpu: dict[str, Any]) -> None:
    """The cpu device renders no GPU memory, custom all-reduce, attention backend or fp8 flags."""
    args = _args(rendered_cpu["knobs"], device="cpu")
    for flag in ("--gpu-memory-utilization", "--disable-custom-all-reduce", "--attention-backend", "--kv-cache-dtype"):
        assert flag not in args
    assert _value(args, "--tensor-parallel-size") == "1"


def test_prefix_caching_off_uses_the_negative_flag(rendered_gpu: dict[str, Any]) -> None:
    """vllm_enable_prefix_caching false renders --no-enable-prefix-caching."""
    args = _args(rendered_gpu["knobs"], vllm_enable_prefix_caching=False)
    assert "--no-enable-prefix-caching" in args
    assert "--enable-prefix-caching" not in args


def test_optional_flags_appear_only_when_set(rendered_gpu: dict[str, Any]) -> None:
    """KV bytes, quantization, PP, chat template kwargs and rope overrides render when set."""
    args = _args(
        rendered_gpu["knobs"],
        vllm_kv_cache_memory_bytes="4G",
        vllm_quantization="awq_marlin",
        vllm_pipeline_parallel_size=2,
        vllm_default_chat_template_kwargs={"enable_thinking": False},
        vllm_rope_override={"rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
    )
    assert _value(args, "--kv-cache-memory-bytes") == "4G"
    assert _value(args, "--quantization") == "awq_marlin"
    assert _value(args, "--pipeline-parallel-size") == "2"
    assert _value(args, "--default-chat-template-kwargs") == '{"enable_thinking":false}'
    assert _value(args, "--hf-overrides") == '{"rope_scaling":{"factor":2.0,"rope_type":"yarn"}}'


def test_extra_args_are_appended_last(rendered_gpu: dict[str, Any]) -> None:
    """vllm_extra_args come after every rendered flag, verbatim."""
    args = _args(rendered_gpu["knobs"], vllm_extra_args=["--max-cudagraph-capture-size", "16"])
    assert args[-2:] == ["--max-cudagraph-capture-size", "16"]


@pytest.mark.parametrize(
    ("changes", "variable"),
    [
        ({"vllm_extra_args": ["--foo bar"]}, "vllm_extra_args"),
        ({"vllm_extra_args": [""]}, "vllm_extra_args"),
        ({"vllm_default_chat_template_kwargs": {"system": "be brief"}}, "vllm_default_chat_template_kwargs"),
        ({"vllm_served_model_name": "my model"}, "vllm_served_model_name"),
    ],
)
def test_whitespace_in_an_argument_names_the_variable(
    rendered_gpu: dict[str, Any], changes: dict[str, Any], variable: str
) -> None:
    """systemd would split an argument with a space; the error names the knob behind it."""
    with pytest.raises(ConfigError, match=rf"^{variable}: "):
        _args(rendered_gpu["knobs"], **changes)


def test_service_env_on_cuda(rendered_gpu: dict[str, Any]) -> None:
    """The cuda environment carries the command line, the key, PCI order and the FlashInfer switch."""
    args = _args(rendered_gpu["knobs"])
    env = service_env(rendered_gpu["knobs"], device="cuda", args=args, cache_dir="/var/cache/vllm", api_key="k1")
    assert env["VLLM_ARGS"] == " ".join(args)
    assert env["VLLM_API_KEY"] == "k1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert env["HF_HUB_OFFLINE"] == "1"
    # The unit allows loopback only: tensor-parallel ranks bootstrap over lo.
    assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == ("lo", "lo")
    assert env["VLLM_CACHE_ROOT"] == "/var/cache/vllm"
    assert "VLLM_CPU_KVCACHE_SPACE" not in env
    assert "VLLM_ATTENTION_BACKEND" not in env  # ignored by current vLLM; the flag does the job


def test_service_env_on_cpu_with_extra_env(rendered_cpu: dict[str, Any]) -> None:
    """The cpu environment sizes the KV pool; vllm_extra_env is merged last."""
    knobs = {**rendered_cpu["knobs"], "vllm_cpu_kvcache_space_gib": 3, "vllm_extra_env": {"NCCL_DEBUG": "INFO"}}
    env = service_env(knobs, device="cpu", args=["--x"], cache_dir="/c", api_key="k")
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "3"
    assert env["NCCL_DEBUG"] == "INFO"
    assert "CUDA_DEVICE_ORDER" not in env


def test_bad_extra_env_name_is_refused(rendered_cpu: dict[str, Any]) -> None:
    """An environment variable name with a space or a dash names vllm_extra_env."""
    knobs = {**rendered_cpu["knobs"], "vllm_extra_env": {"BAD NAME": "1"}}
    with pytest.raises(ConfigError, match=r"^vllm_extra_env: "):
        service_env(knobs, device="cpu", args=[], cache_dir="/c", api_key="k")


def test_env_file_quotes_and_escapes() -> None:
    """Values are double-quoted with backslashes and quotes escaped, one sorted line each."""
    text = env_file({"B": 'say "hi"', "A": "c:\\path", "C": "plain"})
    assert text == 'A="c:\\\\path"\nB="say \\"hi\\""\nC="plain"\n'


def test_env_file_refuses_line_breaks() -> None:
    """A line break would end the assignment early; the variable is named."""
    with pytest.raises(ConfigError, match=r"^VLLM_API_KEY: "):
        env_file({"VLLM_API_KEY": "abc\ndef"})


@pytest.mark.parametrize(
    "name",
    ["VLLM_API_KEY", "HF_TOKEN", "my_secret", "DB_PASSWORD", "SMTP_PASS", "AWS_CREDENTIALS", "Proxy_Auth", "apikey"],
)
def test_public_env_keeps_only_the_name_of_a_credential(name: str) -> None:
    recorded = public_env({name: "hunter2", "VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_ARGS": "--port 8000"})
    assert recorded == {"env": {"VLLM_CPU_KVCACHE_SPACE": "4"}, "secret_names": [name]}
    assert "hunter2" not in repr(recorded)


def test_public_env_of_the_rendered_unit_environment(rendered_cpu: dict[str, Any]) -> None:
    """The environment the role renders: every value but the key's, and no command line."""
    knobs = {**rendered_cpu["knobs"], "vllm_extra_env": {"OMP_NUM_THREADS": "4", "HF_TOKEN": "hf_x"}}
    env = service_env(knobs, device="cpu", args=["--port", "8000"], cache_dir="/c", api_key="k3y")
    recorded = public_env(env)
    assert recorded["secret_names"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert recorded["env"]["OMP_NUM_THREADS"] == "4"
    assert recorded["env"]["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_ARGS" not in recorded["env"]
    assert "k3y" not in repr(recorded)
    assert "hf_x" not in repr(recorded)


def test_owned_flags_name_the_knob_that_writes_each_flag(rendered_gpu: dict[str, Any]) -> None:
    """Every flag serve_args can write, with every toggle on (and prefix caching both ways), is in
    OWNED_FLAGS with the knob that wrote it; the table holds nothing serve_args never writes
    except vLLM's own short aliases."""
    every = {
        **rendered_gpu["knobs"],
        "vllm_kv_cache_memory_bytes": "8G",
        "vllm_quantization": "awq_marlin",
        "vllm_pipeline_parallel_size": 2,
        "vllm_mtp": True,
        "vllm_rope_override": {"rope_scaling": {"rope_type": "yarn"}},
        "vllm_default_chat_template_kwargs": {"enable_thinking": False},
    }
    written = flag_owners(every, device="cuda") | flag_owners(
        {**every, "vllm_enable_prefix_caching": False}, device="cuda"
    )
    written.pop("--disable-access-log-for-endpoints")  # llmrig's own, not a knob's
    assert written.pop("--model") == "llmrig_models_dir"
    expected = {flag: knob for flag, knob in OWNED_FLAGS.items() if flag != "--model"}
    aliases = {"-tp", "-pp", "-q"}
    assert written == {flag: knob for flag, knob in expected.items() if flag not in aliases}
    assert {OWNED_FLAGS[alias] for alias in aliases} <= set(written.values())


@pytest.mark.parametrize(
    ("arg", "knob"),
    [
        ("--max-model-len", "vllm_max_model_len"),
        ("--max_model_len=4096", "vllm_max_model_len"),
        ("-tp", "vllm_tensor_parallel_size"),
        ("--port=9000", "vllm_port"),
        ("--swap-space", None),
        ("4096", None),
    ],
)
def test_owned_flag(arg: str, knob: str | None) -> None:
    assert owned_flag(arg) == knob
