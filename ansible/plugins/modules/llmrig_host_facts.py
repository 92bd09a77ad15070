#!/usr/bin/python
"""Ansible module: read-only host facts for llmrig's preflight (OS, CPU, RAM, disk, NVIDIA GPUs,
the paths the knobs name, the schedules systemd-analyze accepts, the listening TCP ports)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_host_facts
short_description: Gather the host facts llmrig's preflight needs, changing nothing
description:
  - Reads C(/etc/os-release), C(/proc/cpuinfo) and C(/proc/meminfo), measures free and used
    space where models go, and lists NVIDIA GPUs with C(nvidia-smi) or, when the driver is not
    installed yet, with C(lspci).
  - Publishes everything as the fact C(llmrig_host).
options:
  models_dir:
    description: Directory where model weights go; it need not exist yet.
    type: path
    required: true
  nvidia_smi_timeout:
    description: Seconds to wait for C(nvidia-smi) before falling back to C(lspci).
    type: int
    default: 20
  paths:
    description:
      - Knob name to the path it holds on the host (empty values are left out). Each is reported
        under C(paths) with C(absolute), C(kind) (dir, file, other or missing), C(executable),
        C(parent) (its closest existing parent), C(parent_kind) and C(parent_writable).
    type: dict
    default: {}
  addresses:
    description:
      - Knob name to the bind address it holds (empty values are left out). Each is reported under
        C(addresses) with C(address), C(bindable) (this host can bind it) and C(error) (why not).
    type: dict
    default: {}
  calendars:
    description:
      - Knob name to the systemd OnCalendar expression it holds (empty values are left out). Each is
        reported under C(calendars) with C(checked) (C(systemd-analyze) is on the host) and C(valid)
        (C(systemd-analyze calendar) accepts it; true when it could not be checked).
    type: dict
    default: {}
author: llmrig
"""

EXAMPLES = r"""
- name: Gather llmrig host facts
  llmrig_host_facts:
    models_dir: /srv/llmrig/models
"""

RETURN = r"""
ansible_facts:
  description: C(llmrig_host) with os, cpu, memory, disk, gpus, gpu_source, driver_version, paths,
    addresses, calendars and listeners (one per listening TCP socket, with address, port, pid, process
    and unit; pid 0 and empty names when the holder cannot be seen).
  returned: always
  type: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.llmrig_probe import listeners, probe_address, probe_path, read_text

# GPUs whose facts lspci cannot tell (before the driver is installed): PCI device id ->
# (name, memory MiB, compute capability). Ids from lspci output of these cards.
KNOWN_PCI_DEVICES = {
    "2d04": ("NVIDIA GeForce RTX 5060 Ti", 16311, "12.0"),
    "2f04": ("NVIDIA GeForce RTX 5070", 12227, "12.0"),
    "2c05": ("NVIDIA GeForce RTX 5070 Ti", 16303, "12.0"),
    "2c02": ("NVIDIA GeForce RTX 5080", 16303, "12.0"),
    "2b85": ("NVIDIA GeForce RTX 5090", 32607, "12.0"),
}
NVIDIA_SMI_QUERY = "index,name,memory.total,compute_cap,driver_version,pci.bus_id,pci.device_id"
LSPCI_RE = re.compile(r'^(?P<slot>\S+) "(?P<cls>[^"]*)" "(?P<vendor>[^"]*)" "(?P<device>[^"]*)"')


def parse_os_release(text):
    """Return id, version_id, pretty_name and family from /etc/os-release text."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    ids = [values.get("ID", ""), *values.get("ID_LIKE", "").split()]
    return {
        "id": values.get("ID", ""),
        "version_id": values.get("VERSION_ID", ""),
        "pretty_name": values.get("PRETTY_NAME", ""),
        "family": "debian" if "debian" in ids or "ubuntu" in ids else (ids[0] if ids else ""),
    }


def parse_cpuinfo(text):
    """Return the CPU model, logical CPU count and the AVX2/AVX-512 flags from /proc/cpuinfo."""
    model, count, flags = "", 0, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            count += 1
        elif key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return {"model": model, "logical_cpus": count, "avx2": "avx2" in flags, "avx512f": "avx512f" in flags}


def parse_meminfo(text):
    """Return MemTotal and MemAvailable in bytes from /proc/meminfo."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"^(MemTotal|MemAvailable):\s+(\d+) kB", line)
        if match:
            found[match.group(1)] = int(match.group(2)) * 1024
    return {"total_bytes": found.get("MemTotal", 0), "available_bytes": found.get("MemAvailable", 0)}


def parse_nvidia_smi(text):
    """Parse `nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits` output."""
    found = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 7 or not fields[0].isdigit():
            continue
        index, name, memory, cc, driver, bus_id, device_id = fields
        found.append(
            {
                "index": int(index),
                "name": name,
                "memory_mib": int(memory) if memory.isdigit() else None,
                "compute_capability": cc if re.fullmatch(r"\d+\.\d+", cc) else "",
                "driver_version": driver,
                "pci_bus_id": bus_id,
                # nvidia-smi prints 0x2D0410DE: device id in the high half, vendor in the low half.
                "pci_device_id": "10de:" + device_id[2:6].lower() if device_id.lower().startswith("0x") else "",
            }
        )
    return found


def parse_lspci(text):
    """Parse `lspci -mm -n -d 10de:` lines for display controllers (class 03xx) only."""
    found = []
    for line in text.splitlines():
        match = LSPCI_RE.match(line.strip())
        if not match or not match.group("cls").startswith("03"):
            continue
        device = match.group("device").lower()
        name, memory, cc = KNOWN_PCI_DEVICES.get(device, ("NVIDIA device 10de:" + device, None, ""))
        found.append(
            {
                "index": len(found),
                "name": name,
                "memory_mib": memory,
                "compute_capability": cc,
                "driver_version": "",
                "pci_bus_id": match.group("slot"),
                "pci_device_id": "10de:" + device,
            }
        )
    return found


def nearest_existing(path):
    """The path itself or its closest existing parent (the models dir may not exist yet)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def used_bytes(path):
    """Bytes under path (0 when it does not exist): weights already downloaded count as room."""
    total = 0
    if not os.path.isdir(path):
        return 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def gather_gpus(module):
    """GPUs from nvidia-smi, else from lspci; returns (gpus, source, driver_version)."""
    timeout = module.params["nvidia_smi_timeout"]
    smi = module.get_bin_path("nvidia-smi")
    if smi:
        rc, out, _err = module.run_command(
            ["timeout", str(timeout), smi, "--query-gpu=" + NVIDIA_SMI_QUERY, "--format=csv,noheader,nounits"]
        )
        found = parse_nvidia_smi(out) if rc == 0 else []
        if found:
            return found, "nvidia-smi", found[0]["driver_version"]
    lspci = module.get_bin_path("lspci")
    if lspci:
        rc, out, _err = module.run_command([lspci, "-mm", "-n", "-d", "10de:"])
        found = parse_lspci(out) if rc == 0 else []
        if found:
            return found, "lspci", ""
    return [], "none", ""


def check_calendar(module, expression):
    """Whether systemd accepts ``expression`` as an OnCalendar value (valid stays true when
    systemd-analyze is not on the host: the timer unit's own check then speaks)."""
    analyze = module.get_bin_path("systemd-analyze")
    if analyze is None:
        return {"checked": False, "valid": True}
    rc, _out, _err = module.run_command([analyze, "calendar", "--", expression])
    return {"checked": True, "valid": rc == 0}


def main():
    module = AnsibleModule(
        argument_spec={
            "models_dir": {"type": "path", "required": True},
            "nvidia_smi_timeout": {"type": "int", "default": 20},
            "paths": {"type": "dict", "default": {}},
            "addresses": {"type": "dict", "default": {}},
            "calendars": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    models_dir = module.params["models_dir"]
    probe = nearest_existing(models_dir)
    stat = os.statvfs(probe)
    found, source, driver = gather_gpus(module)
    facts = {
        "os": parse_os_release(read_text("/etc/os-release")),
        "cpu": parse_cpuinfo(read_text("/proc/cpuinfo")),
        "memory": parse_meminfo(read_text("/proc/meminfo")),
        "disk": {
            "path": models_dir,
            "probe_path": probe,
            "free_bytes": stat.f_bavail * stat.f_frsize,
            "used_bytes": used_bytes(models_dir),
        },
        "gpus": found,
        "gpu_count": len(found),
        "gpu_source": source,
        "driver_version": driver,
        "paths": {
            str(name): probe_path(str(value))
            for name, value in module.params["paths"].items()
            if value not in (None, "")
        },
        "addresses": {
            str(name): probe_address(str(value))
            for name, value in module.params["addresses"].items()
            if value not in (None, "")
        },
        "calendars": {
            str(name): check_calendar(module, str(value))
            for name, value in module.params["calendars"].items()
            if value not in (None, "")
        },
        "listeners": listeners(),
    }
    module.exit_json(changed=False, ansible_facts={"llmrig_host": facts})


if __name__ == "__main__":
    main()
