"""``bench plan``: the KV planner on the command line (arguments in, the arithmetic printed).

Defaults are what the vllm role would render from group_vars for the chosen device; every knob
that shapes the pool has a flag. ``--check`` replays the settings recorded in deployment.json and
compares the prediction with the pool the engine reported at start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from bench.errors import ConfigError
from bench.measure.target import find_deployment
from bench.rig import literal_knobs, read_deployment
from bench.rig.plan import Plan, Setup, plan
from bench.rig.plan_inputs import (
    DEVICE_DEFAULTS,
    architecture_from_config,
    load_config_json,
    setup_from_deployment,
    setup_from_knobs,
)
from bench.rig.presets import Architecture, find_models_file, load_presets

EXIT_DOES_NOT_FIT = 4
RTX_5060_TI_MIB = 16311  # nvidia-smi memory.total of one RTX 5060 Ti 16 GB
FLAG_KNOBS = {
    "max_model_len": "vllm_max_model_len",
    "max_num_seqs": "vllm_max_num_seqs",
    "max_num_batched_tokens": "vllm_max_num_batched_tokens",
    "tensor_parallel_size": "vllm_tensor_parallel_size",
    "kv_cache_dtype": "vllm_kv_cache_dtype",
    "gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "cpu_kvcache_space_gib": "vllm_cpu_kvcache_space_gib",
    "kv_cache_memory_bytes": "vllm_kv_cache_memory_bytes",
}

EXAMPLES = """\
examples:
  bench plan                                   the configured preset on the 2 x 16 GB box, group_vars defaults
  bench plan qwen3.8-27b-w4a16 --max-model-len 262144 --max-num-seqs 4 --gpu-memory-utilization 0.95
  bench plan --mtp-tokens 1                    the same with multi-token prediction on
  bench plan gemma3-270m --device cpu --cpu-kvcache-space-gib 2
  bench plan --config-json Qwen/Qwen3.5-27B@main --weights-gb 19.5    any model from its config.json
  bench plan --check                           prediction versus the pool in artifacts/*/deployment.json

exit status: 0 the plan fits (warnings included), 4 vLLM could not start with it, 2 bad input
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench plan``."""
    parser = commands.add_parser(
        "plan",
        help="predict the KV cache pool and what fits, before deploying (or check a deployment)",
        description="Predict vLLM's KV cache pool for a model and settings, print the arithmetic line by line, and "
        "judge whether one sequence of max_model_len (and max_num_seqs of them) fits. Defaults: group_vars.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("preset", nargs="?", help="model preset (default: model in group_vars, auto by device)")
    parser.add_argument(
        "--config-json", metavar="SOURCE", help="plan a model from its config.json: a path, or REPO[@REVISION] (hub)"
    )
    parser.add_argument(
        "--weights-gb", type=float, metavar="GB", help="weights across all GPUs (default: the preset's)"
    )
    box = parser.add_argument_group("the box")
    box.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda (default) or the cpu build")
    box.add_argument("--gpus", type=int, default=2, metavar="N", help="GPUs (default 2)")
    box.add_argument(
        "--gpu-memory-mib",
        type=int,
        default=RTX_5060_TI_MIB,
        metavar="MIB",
        help="memory of one GPU, nvidia-smi memory.total (default 16311, an RTX 5060 Ti)",
    )
    knobs = parser.add_argument_group("vLLM settings (default: what the vllm role renders)")
    knobs.add_argument("--max-model-len", type=int, metavar="N", help="vllm_max_model_len (default: the preset's)")
    knobs.add_argument("--max-num-seqs", type=int, metavar="N", help="vllm_max_num_seqs (default: the preset's)")
    knobs.add_argument("--max-num-batched-tokens", type=int, metavar="N", help="vllm_max_num_batched_tokens")
    knobs.add_argument(
        "--tensor-parallel-size", type=int, metavar="N", help="vllm_tensor_parallel_size (2 cuda, 1 cpu)"
    )
    knobs.add_argument("--kv-cache-dtype", metavar="DTYPE", help="vllm_kv_cache_dtype: fp8 (cuda), auto (model dtype)")
    knobs.add_argument("--gpu-memory-utilization", type=float, metavar="F", help="vllm_gpu_memory_utilization")
    knobs.add_argument(
        "--kv-cache-memory-bytes", metavar="SIZE", help="KV memory per GPU, e.g. 4G (GiB); replaces the budget"
    )
    knobs.add_argument("--cpu-kvcache-space-gib", type=int, metavar="GIB", help="cpu: VLLM_CPU_KVCACHE_SPACE")
    knobs.add_argument("--mtp-tokens", type=int, metavar="K", help="vllm_mtp_tokens with MTP on (0 = off)")
    knobs.add_argument("--no-prefix-caching", action="store_true", help="as --no-enable-prefix-caching")
    knobs.add_argument("--cuda-graphs", action="store_true", help="CUDA graphs on (vllm_enforce_eager: false)")
    knobs.add_argument(
        "--reserve-gib",
        type=float,
        metavar="GIB",
        help="reserve per GPU for activations and CUDA graphs (default 1.25)",
    )
    parser.add_argument("--check", action="store_true", help="compare with the pool recorded in deployment.json")
    parser.add_argument(
        "--deployment", type=Path, metavar="PATH", help="deployment.json for --check (default: artifacts/*/)"
    )


def _knobs(args: argparse.Namespace, config_dir: Path, serve: tuple[int, int]) -> dict[str, object]:
    """group_vars, then the device's rendered defaults, then the flags."""
    knobs = literal_knobs(config_dir)
    knobs.update(DEVICE_DEFAULTS[args.device])
    knobs.setdefault("vllm_max_model_len", serve[0])
    knobs.setdefault("vllm_max_num_seqs", serve[1])
    for flag, knob in FLAG_KNOBS.items():
        if getattr(args, flag) is not None:
            knobs[knob] = getattr(args, flag)
    if args.mtp_tokens is not None:
        knobs["vllm_mtp"], knobs["vllm_mtp_tokens"] = args.mtp_tokens > 0, args.mtp_tokens
    if args.no_prefix_caching:
        knobs["vllm_enable_prefix_caching"] = False
    if args.cuda_graphs:
        knobs["vllm_enforce_eager"] = False
    return knobs


def _model(args: argparse.Namespace, config_dir: Path) -> tuple[str, Architecture, int, float, tuple[int, int]]:
    """Name, architecture, native context, weights and the preset's serve defaults."""
    if args.config_json:
        config, where = load_config_json(args.config_json)
        arch, native = architecture_from_config(config, where)
        if args.device == "cuda" and args.weights_gb is None and not args.kv_cache_memory_bytes:
            raise ConfigError("--weights-gb: needed with --config-json on cuda (the checkpoint size in GB)")
        return args.config_json, arch, native or 32768, args.weights_gb or 0.0, (native or 32768, 8)
    presets = load_presets(config_dir / "models.yml")
    name = args.preset or str(literal_knobs(config_dir).get("model", "auto"))
    if name == "auto":
        name = str(literal_knobs(config_dir)[f"model_auto_{args.device}"])
    if name not in presets:
        raise ConfigError(f"no preset {name!r}; known: {', '.join(presets)}")
    preset = presets[name]
    weights = args.weights_gb if args.weights_gb is not None else preset.weights_gb
    serve = (preset.serve_max_model_len, preset.serve_max_num_seqs)
    return name, preset.architecture, preset.native_context, weights, serve


def _headline(name: str, setup: Setup) -> str:
    where = "cpu device" if setup.device == "cpu" else f"{setup.gpus} x {setup.gpu_memory_mib:,} MiB GPUs"
    mtp = f"MTP {setup.mtp_tokens}" if setup.mtp_tokens else "MTP off"
    return (
        f"KV plan: {name} on {where}, TP {setup.tensor_parallel_size}, {setup.kv_cache_dtype} KV, "
        f"max_model_len {setup.max_model_len:,}, max_num_seqs {setup.max_num_seqs}, {mtp}"
    )


def show(console: Console, name: str, result: Plan) -> None:
    """The arithmetic, line by line, then the verdict and what to change."""
    console.print(escape(_headline(name, result.setup)), soft_wrap=True)
    for label, text in result.lines:
        console.print(f"  {label:<16} {escape(text)}", soft_wrap=True)
    console.print(
        f"verdict: {result.verdict}: {result.pool_tokens:,} tokens, {result.full_sequences} full sequence(s) of "
        f"{result.setup.max_model_len:,} at once (asked: {result.setup.max_num_seqs})",
        soft_wrap=True,
    )
    for problem in result.problems:
        console.print(f"  {problem.severity}: {problem.variable}: {escape(problem.message)}", soft_wrap=True)
    console.print(
        f"largest vllm_max_model_len for one sequence: {result.largest_max_model_len:,}; "
        f"for {result.setup.max_num_seqs} sequences: {result.largest_len_for_all_seqs:,}",
        soft_wrap=True,
    )


def _check(args: argparse.Namespace, console: Console, config_dir: Path) -> int:
    path = find_deployment(args.deployment, config_dir)
    if path is None:
        raise ConfigError("--deployment: no deployment.json given and none under artifacts/*/")
    deployment = read_deployment(path)
    presets = load_presets(config_dir / "models.yml")
    name = deployment.preset
    if name not in presets:
        raise ConfigError(f"--deployment: {path} names preset {name!r}, which group_vars does not define")
    preset = presets[name]
    setup = setup_from_deployment(deployment, args.weights_gb or preset.weights_gb)
    result = plan(preset.architecture, setup, preset.native_context)
    show(console, name, result)
    reported = deployment.startup.kv_cache_tokens
    if reported is None:
        raise ConfigError(f"--deployment: {path} records no KV pool (startup.kv_cache_tokens)")
    error = (result.pool_tokens - reported) / reported * 100
    console.print(
        f"check: predicted {result.pool_tokens:,} tokens, {deployment.engine} reported {reported:,} "
        f"({path}); error {error:+.1f}%",
        soft_wrap=True,
    )
    return 0


def command(args: argparse.Namespace, console: Console) -> int:
    """bench plan: print the plan (or the check) and return the exit status."""
    config_dir = find_models_file((args.config_dir or Path.cwd()).resolve()).parent
    if args.check:
        return _check(args, console, config_dir)
    name, arch, native, weights, serve = _model(args, config_dir)
    knobs = _knobs(args, config_dir, serve)
    gpus = [{"memory_mib": args.gpu_memory_mib}] * (args.gpus if args.device == "cuda" else 0)
    setup = dataclasses.replace(setup_from_knobs(knobs, args.device, weights, gpus), reserve_gib=args.reserve_gib)
    result = plan(arch, setup, native)
    show(console, name, result)
    return EXIT_DOES_NOT_FIT if result.verdict == "fails" else 0
