"""The host part of deployment.json: what preflight found on the host (its GPUs, the driver and
the CPU), as :mod:`bench.rig.deployment` records it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Gpu:
    """One NVIDIA GPU as preflight's host facts list it (nvidia-smi, or lspci without a driver)."""

    index: int
    name: str
    memory_mib: int | None
    compute_capability: str
    driver_version: str
    pci_bus_id: str
    pci_device_id: str


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What preflight found on the host: its GPUs, the driver's version ('' without one) and the CPU."""

    gpus: list[Gpu]
    driver_version: str
    cpu: str
