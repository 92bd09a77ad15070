"""The NVIDIA driver's facts and decisions, for the ``preflight`` and ``nvidia_driver`` roles.

The roles run read-only probes on the host (``lspci -nn``, ``/proc/driver/nvidia/version``,
``modinfo nvidia``, ``nvidia-smi --query-gpu=...``; parsed by :mod:`bench.rig.nvidia_probes`)
and hand their raw text to the filters in ``ansible/plugins/filter/llmrig.py``, which call the
functions here on the controller:

- :func:`hardware_decision`: manage the driver, or skip the role on a host without NVIDIA GPUs;
- :func:`driver_state`: what is loaded (open or closed module, version) and what the GPUs report;
- :func:`reboot_decision`: after a change, reboot, stop with one message, or go on;
- :func:`driver_problems`: the checks after the (re)boot, each naming the knob or the action
  that fixes it.

Blackwell (compute capability 12.0) needs the open kernel modules, and the CUDA 13 builds of
vLLM need driver branch :data:`BRANCH_FLOOR` or newer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.rig.nvidia_probes import (
    InstalledModule,
    LoadedDriver,
    PciGpu,
    SmiGpu,
    branch_of,
    parse_lspci_nn,
    parse_modinfo,
    parse_proc_version,
    parse_smi,
)
from bench.rig.problems import Problem

BRANCH_FLOOR = 580


@dataclass(frozen=True, slots=True)
class DriverState:
    """Everything the probes found: loaded module, module on disk, GPUs listed by nvidia-smi."""

    loaded: LoadedDriver | None
    installed: InstalledModule | None
    gpus: tuple[SmiGpu, ...]
    smi_ok: bool
    pci: tuple[PciGpu, ...] = ()

    @property
    def reboot_pending(self) -> bool:
        """A driver is on disk but not loaded, or another version than the one loaded."""
        if self.installed is None:
            return False
        return self.loaded is None or self.loaded.version != self.installed.version


@dataclass(frozen=True, slots=True)
class HardwareDecision:
    """Whether the driver role manages this host, and the one line that says so."""

    manage: bool
    gpu_count: int
    line: str


@dataclass(frozen=True, slots=True)
class RebootDecision:
    """After the driver or the nouveau blacklist changed: ``reboot``, ``stop`` (with one message)
    or ``continue`` (nothing to load, or a test host that cannot load modules)."""

    action: str
    message: str


def hardware_decision(gpus: Sequence[Mapping[str, Any]], source: str) -> HardwareDecision:
    """Manage the driver where preflight found NVIDIA GPUs (nvidia-smi, else lspci); skip elsewhere."""
    if not gpus:
        return HardwareDecision(
            False, 0, "nvidia_driver: skipped, no NVIDIA GPU on this host (neither nvidia-smi nor lspci lists one)"
        )
    return HardwareDecision(True, len(gpus), f"nvidia_driver: {len(gpus)} NVIDIA GPU(s) found by {source}")


def driver_state(proc_version: str, modinfo: str, smi: str, smi_rc: int, lspci: str = "") -> DriverState:
    """The driver's state from the raw probe outputs (empty text where a probe found nothing)."""
    gpus = tuple(parse_smi(smi)) if smi_rc == 0 else ()
    return DriverState(
        parse_proc_version(proc_version),
        parse_modinfo(modinfo),
        gpus,
        smi_rc == 0 and bool(gpus),
        tuple(parse_lspci_nn(lspci)),
    )


def reboot_decision(
    changed: bool, state: DriverState, allowed: bool, connection: str, no_kernel: bool
) -> RebootDecision:
    """What to do once the driver packages or the nouveau blacklist changed, or a driver on disk
    is not the one loaded. ``no_kernel`` is for test containers, which cannot load modules or
    reboot: the role then reads the state the test's fake packages wrote and goes on."""
    if not (changed or state.reboot_pending):
        return RebootDecision("continue", "nothing to load")
    if no_kernel:
        return RebootDecision(
            "continue", "not rebooting: nvidia_driver_test_no_kernel says this host cannot load kernel modules"
        )
    if allowed and connection != "local":
        return RebootDecision("reboot", "rebooting to load the NVIDIA driver")
    why = (
        "the play runs on the host itself (connection local), which cannot reboot under it"
        if allowed
        else "nvidia_driver_reboot_allowed is false"
    )
    return RebootDecision(
        "stop",
        "The NVIDIA driver or the nouveau blacklist changed and needs a reboot to load, and "
        f"{why}: reboot the host (sudo reboot), then run ansible-playbook site.yml again; it "
        "continues from here.",
    )


def _driver_loaded_problems(state: DriverState, branch: int) -> list[Problem]:
    loaded = state.loaded
    if loaded is None:
        return [
            Problem(
                "reboot",
                "no NVIDIA kernel module is loaded (no /proc/driver/nvidia/version); reboot the host and run "
                "site.yml again",
            )
        ]
    if not loaded.open_modules:
        return [
            Problem(
                "nvidia_driver_source",
                f"the closed NVIDIA kernel module {loaded.version} is loaded ({loaded.banner!r}); Blackwell "
                "needs the open modules: purge the proprietary driver (sudo apt purge 'nvidia-dkms-*' "
                "'nvidia-kernel-*'), reboot, and run site.yml again",
            )
        ]
    loaded_branch = branch_of(loaded.version)
    if loaded_branch is not None and loaded_branch < BRANCH_FLOOR:
        return [
            Problem(
                "nvidia_driver_branch",
                f"driver {loaded.version} is loaded, below branch {BRANCH_FLOOR} that CUDA 13 builds of vLLM "
                f"need; set nvidia_driver_branch: {BRANCH_FLOOR} or newer and run site.yml again",
            )
        ]
    if loaded_branch != branch:
        return [
            Problem(
                "nvidia_driver_branch",
                f"driver {loaded.version} is loaded but branch {branch} is pinned; reboot if the pinned branch "
                f"was just installed, or set nvidia_driver_branch: {loaded_branch}",
            )
        ]
    return []


def driver_problems(state: DriverState, branch: int, gpu_count: int, compute_capability: str) -> list[Problem]:
    """The checks after the (re)boot: the open module of the pinned branch is loaded, nvidia-smi
    lists ``gpu_count`` GPUs, each of ``compute_capability``."""
    problems = _driver_loaded_problems(state, branch)
    if problems:
        return problems
    if not state.smi_ok:
        return [
            Problem(
                "reboot",
                "nvidia-smi cannot talk to the driver (the module on disk may differ from the loaded one); "
                "reboot the host and run site.yml again",
            )
        ]
    if len(state.gpus) != gpu_count:
        names = ", ".join(gpu.name for gpu in state.gpus)
        pci = f", lspci shows {len(state.pci)}" if state.pci else ""
        return [
            Problem(
                "nvidia_driver_gpu_count",
                f"nvidia-smi lists {len(state.gpus)} GPU(s) ({names}{pci}) but {gpu_count} are expected; check that "
                f"every card is seated and powered, or set nvidia_driver_gpu_count: {len(state.gpus)}",
            )
        ]
    for gpu in state.gpus:
        if gpu.compute_capability != compute_capability:
            problems.append(
                Problem(
                    "nvidia_driver_compute_capability",
                    f"GPU {gpu.index} ({gpu.name}) has compute capability {gpu.compute_capability or 'unknown'}, "
                    f"expected {compute_capability}; set nvidia_driver_compute_capability to the cards' value",
                )
            )
        if branch_of(gpu.driver_version) != branch:
            problems.append(
                Problem(
                    "nvidia_driver_branch",
                    f"nvidia-smi reports driver {gpu.driver_version} on GPU {gpu.index}, not branch {branch}",
                )
            )
    return problems


def pending_line(state: DriverState) -> str:
    """One line on whether a driver on disk waits for a reboot to load."""
    if not state.reboot_pending or state.installed is None:
        return "no reboot pending: the driver on disk is the one loaded (or modinfo finds none)"
    loaded = state.loaded.version if state.loaded else "none"
    return f"driver {state.installed.version} is on disk but {loaded} is loaded: a reboot loads it"


def summary(state: DriverState) -> str:
    """One line on the loaded driver and its GPUs, for the play's log."""
    if state.loaded is None:
        return "no NVIDIA kernel module loaded"
    flavour = "open" if state.loaded.open_modules else "closed"
    gpus = ", ".join(f"{gpu.name} ({gpu.compute_capability or '?'})" for gpu in state.gpus) or "none listed"
    return f"NVIDIA {flavour} kernel module {state.loaded.version} loaded; GPUs: {gpus}"
