"""Parsers of the NVIDIA driver probes the ``nvidia_driver`` role runs, in the shapes real
hardware prints: ``lspci -nn``, ``/proc/driver/nvidia/version``, ``modinfo nvidia`` and
``nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader``.
:mod:`bench.rig.nvidia` decides from what they return."""

from __future__ import annotations

import re
from dataclasses import dataclass

NVIDIA_VENDOR = "10de"
OPEN_MODULE_TEXT = "Open Kernel Module"
OPEN_LICENSE = "Dual MIT/GPL"
SMI_QUERY = "index,name,compute_cap,driver_version"

# `lspci -nn`: `01:00.0 VGA compatible controller [0300]: NVIDIA Corporation ... [10de:2d04] (rev a1)`
LSPCI_NN_RE = re.compile(
    r"^(?P<slot>\S+) .*? \[(?P<cls>[0-9a-f]{4})\]: .* \[(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})\]"
)
# `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (...)`
# `NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:01 UTC 2024`
NVRM_RE = re.compile(r"^NVRM version: (?P<text>.*?Kernel Module.*?)\s+(?P<version>\d+\.\d+(?:\.\d+)?)\b")
VERSION_RE = re.compile(r"^\d+\.\d+(?:\.\d+)?$")
CC_RE = re.compile(r"^\d+\.\d+$")


@dataclass(frozen=True, slots=True)
class PciGpu:
    """One NVIDIA display controller (PCI class 03xx) that ``lspci -nn`` lists."""

    slot: str
    device_id: str  # "10de:2d04"
    description: str


@dataclass(frozen=True, slots=True)
class SmiGpu:
    """One GPU as ``nvidia-smi --query-gpu=index,name,compute_cap,driver_version`` reports it."""

    index: int
    name: str
    compute_capability: str
    driver_version: str


@dataclass(frozen=True, slots=True)
class LoadedDriver:
    """The kernel module that ``/proc/driver/nvidia/version`` names."""

    open_modules: bool
    version: str
    banner: str


@dataclass(frozen=True, slots=True)
class InstalledModule:
    """The ``nvidia`` module on disk for the running kernel, from ``modinfo nvidia``."""

    version: str
    license: str

    @property
    def open_modules(self) -> bool:
        return self.license == OPEN_LICENSE


def branch_of(version: str) -> int | None:
    """The branch of a driver version ("580.95.05" -> 580), None when it is not a version."""
    return int(version.split(".", 1)[0]) if VERSION_RE.match(version.strip()) else None


def parse_lspci_nn(text: str) -> list[PciGpu]:
    """NVIDIA display controllers (class 03xx: VGA or 3D) from ``lspci -nn`` output; audio
    functions and other vendors are left out."""
    found: list[PciGpu] = []
    for line in text.splitlines():
        match = LSPCI_NN_RE.match(line.strip().lower())
        if match and match["vendor"] == NVIDIA_VENDOR and match["cls"].startswith("03"):
            found.append(PciGpu(match["slot"], f"{NVIDIA_VENDOR}:{match['device']}", line.strip()))
    return found


def parse_proc_version(text: str) -> LoadedDriver | None:
    """The loaded module from ``/proc/driver/nvidia/version`` text; None when no driver is loaded."""
    for line in text.splitlines():
        match = NVRM_RE.match(line.strip())
        if match:
            return LoadedDriver(OPEN_MODULE_TEXT in match["text"], match["version"], line.strip())
    return None


def parse_modinfo(text: str) -> InstalledModule | None:
    """Version and license of the module from ``modinfo nvidia``; None when modinfo found none."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("version", "license") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    version = fields.get("version", "")
    return InstalledModule(version, fields.get("license", "")) if VERSION_RE.match(version) else None


def parse_smi(text: str) -> list[SmiGpu]:
    """GPUs from ``nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv[,noheader]``."""
    found: list[SmiGpu] = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue  # the header, or an error line
        index, name, cc, driver = fields
        found.append(SmiGpu(int(index), name, cc if CC_RE.match(cc) else "", driver))
    return found
