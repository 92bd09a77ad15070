"""Rules on the NVIDIA driver's knobs: the branch floor, and the GPUs the driver role will expect
against the GPUs preflight found (``bench/rig/nvidia.py`` holds the driver's own checks)."""

from __future__ import annotations

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
