"""Rules on the NVIDIA driver's knobs: the branch floor, the GPUs and compute capability the driver
role will expect against the GPUs preflight found, and the module options' shape
(``bench/rig/nvidia.py`` holds the driver's own checks)."""

from __future__ import annotations

import re

from bench.rig.nvidia import BRANCH_FLOOR
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_int, err, gpus


def rule_driver_branch(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The pinned driver branch is at least the floor (CUDA 13 builds of vLLM need 580)."""
    branch = as_int(knobs, "nvidia_driver_branch")
    if branch is None or branch < BRANCH_FLOOR:
        return err(
            "nvidia_driver_branch",
            f"{knobs.get('nvidia_driver_branch')!r} is below {BRANCH_FLOOR}, the first branch that runs the CUDA 13 "
            f"builds of vLLM (and has the open modules Blackwell needs); set it to {BRANCH_FLOOR} or newer",
        )
    return []


def rule_driver_gpu_count(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Where NVIDIA GPUs are found, the driver role's expected count matches (a warning: the role fails later)."""
    found = len(gpus(host))
    expected = as_int(knobs, "nvidia_driver_gpu_count")
    if found and expected != found:
        return [
            Problem(
                "nvidia_driver_gpu_count",
                f"is {expected} but {found} NVIDIA GPU(s) were found; the driver role will fail its check "
                "unless the count is set to what the box holds",
                "warning",
            )
        ]
    return []


# Compute capabilities NVIDIA GPUs have that the open kernel modules drive (Turing, 7.5, and newer).
COMPUTE_CAPABILITIES = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1")


def rule_driver_compute_capability(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The compute capability the driver role requires is one that a GPU on the open modules can
    report; one unlike what the GPUs found report is a warning (the role fails its check later)."""
    wanted = str(knobs.get("nvidia_driver_compute_capability", "")).strip()
    if wanted not in COMPUTE_CAPABILITIES:
        return err(
            "nvidia_driver_compute_capability",
            f"{wanted!r} is no GPU's on the open modules (7.5 to 12.1); RTX 50 cards report 12.0",
        )
    found = sorted({str(gpu.get("compute_capability")) for gpu in gpus(host) if gpu.get("compute_capability")})
    if found and found != [wanted]:
        return [
            Problem(
                "nvidia_driver_compute_capability",
                f"is {wanted} but the GPUs found report {', '.join(found)}; the driver role will fail its check",
                "warning",
            )
        ]
    return []


def rule_driver_module_params(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Module options are a mapping of module name to a mapping of option to value (a string would
    be split by Ansible's type conversion into something else than meant)."""
    params = knobs.get("nvidia_driver_module_params")
    example = "e.g. {nvidia: {NVreg_X: '0x02'}}"
    if not isinstance(params, dict):
        return err("nvidia_driver_module_params", f"needs a mapping of module to options, {example}; got {params!r}")
    for module, options in params.items():
        if not isinstance(options, dict) or not re.fullmatch(r"[A-Za-z0-9_-]+", str(module)):
            return err("nvidia_driver_module_params", f"{module!r} needs a mapping of option to value, {example}")
    return []
