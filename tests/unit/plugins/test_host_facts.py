"""Parsing in the llmrig_host_facts Ansible module (the module itself runs in the playbook tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FAKES, REPO, load_file_module

# Ansible puts module_utils under ansible.module_utils when it runs the module; here, this test does.
sys.modules["ansible.module_utils.llmrig_probe"] = load_file_module(
    REPO / "ansible" / "plugins" / "module_utils" / "llmrig_probe.py", "ansible.module_utils.llmrig_probe"
)
facts = load_file_module(REPO / "ansible" / "plugins" / "modules" / "llmrig_host_facts.py", "llmrig_host_facts")


def test_nvidia_smi_csv_from_the_fake_matches_the_parser() -> None:
    """The fake's answer to the module's own query parses into two sm_120 cards with PCI ids."""
    out = subprocess.run(
        [
            str(FAKES / "gpu-box" / "nvidia-smi"),
            "--query-gpu=" + facts.NVIDIA_SMI_QUERY,
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    gpus = facts.parse_nvidia_smi(out)
    assert [gpu["index"] for gpu in gpus] == [0, 1]
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA GeForce RTX 5060 Ti",
        "memory_mib": 16311,
        "compute_capability": "12.0",
        "driver_version": "580.95.05",
        "pci_bus_id": "00000000:01:00.0",
        "pci_device_id": "10de:2d04",
    }


@pytest.mark.parametrize(
    "text", ["", "No devices were found\n", "NVIDIA-SMI has failed because it couldn't communicate"]
)
def test_nvidia_smi_without_gpus(text: str) -> None:
    """Error text or an empty answer yields no GPUs rather than garbage."""
    assert facts.parse_nvidia_smi(text) == []


def test_nvidia_smi_unknown_fields() -> None:
    """[N/A] memory and capability become None and '' instead of crashing."""
    gpus = facts.parse_nvidia_smi("0, Some GPU, [N/A], [N/A], 580.1, 00000000:01:00.0, [N/A]\n")
    assert (gpus[0]["memory_mib"], gpus[0]["compute_capability"], gpus[0]["pci_device_id"]) == (None, "", "")


def test_lspci_lists_display_controllers_only() -> None:
    """Audio functions of the cards are skipped; known device ids get name, memory and capability."""
    out = subprocess.run(
        [str(FAKES / "gpu-box-no-driver" / "lspci")], capture_output=True, text=True, check=True
    ).stdout
    gpus = facts.parse_lspci(out)
    assert [gpu["pci_bus_id"] for gpu in gpus] == ["01:00.0", "02:00.0"]
    assert {gpu["compute_capability"] for gpu in gpus} == {"12.0"}
    assert {gpu["memory_mib"] for gpu in gpus} == {16311}


def test_lspci_unknown_device() -> None:
    """An NVIDIA card not in the table is still counted, with unknown capability."""
    gpus = facts.parse_lspci('03:00.0 "0302" "10de" "20b5" -ra1 "10de" "1533"\n')
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA device 10de:20b5",
            "memory_mib": None,
            "compute_capability": "",
            "driver_version": "",
            "pci_bus_id": "03:00.0",
            "pci_device_id": "10de:20b5",
        }
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n',
            {"id": "ubuntu", "version_id": "24.04", "pretty_name": "Ubuntu 24.04.1 LTS", "family": "debian"},
        ),
        (
            'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n',
            {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12 (bookworm)", "family": "debian"},
        ),
        (
            'ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n',
            {"id": "rocky", "version_id": "9.4", "pretty_name": "", "family": "rocky"},
        ),
    ],
)
def test_os_release(text: str, expected: dict[str, str]) -> None:
    """Ubuntu and Debian map to the debian family; others keep their own id."""
    assert facts.parse_os_release(text) == expected


def test_cpuinfo_and_meminfo() -> None:
    """CPU model, count and AVX2; memory in bytes."""
    cpuinfo = "processor\t: 0\nmodel name\t: AMD Ryzen 9 7900\nflags\t\t: fpu sse avx2\n\nprocessor\t: 1\n"
    assert facts.parse_cpuinfo(cpuinfo) == {
        "model": "AMD Ryzen 9 7900",
        "logical_cpus": 2,
        "avx2": True,
        "avx512f": False,
    }
    meminfo = "MemTotal:       65536000 kB\nMemFree:  1 kB\nMemAvailable:   32768000 kB\n"
    assert facts.parse_meminfo(meminfo) == {"total_bytes": 65536000 * 1024, "available_bytes": 32768000 * 1024}


def test_disk_probe_walks_up_to_an_existing_parent(tmp_path: Path) -> None:
    """A models dir that does not exist yet is measured on its nearest existing parent."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.bin").write_bytes(b"x" * 1000)
    assert facts.nearest_existing(str(tmp_path / "not" / "yet")) == str(tmp_path)
    assert facts.used_bytes(str(tmp_path / "models")) == 1000
    assert facts.used_bytes(str(tmp_path / "absent")) == 0


class _Module:
    """What check_calendar asks of AnsibleModule: where systemd-analyze is, and to run it."""

    def __init__(self, analyze: str | None) -> None:
        self.analyze = analyze

    def get_bin_path(self, name: str) -> str | None:
        return self.analyze if name == "systemd-analyze" else None

    def run_command(self, argv: list[str]) -> tuple[int, str, str]:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not on this machine")
@pytest.mark.parametrize(
    ("expression", "valid"),
    [("*-*-* 03:30:00", True), ("Sun *-*-* 05:00:00", True), ("daily", True), ("Mon 25:00", False), ("-1", False)],
)
def test_systemd_analyze_checks_each_schedule(expression: str, valid: bool) -> None:
    """systemd-analyze calendar takes the expression after --, so one that starts with - is no option."""
    module = _Module(shutil.which("systemd-analyze"))
    assert facts.check_calendar(module, expression) == {"checked": True, "valid": valid}


def test_a_host_without_systemd_analyze_leaves_the_schedules_unchecked() -> None:
    assert facts.check_calendar(_Module(None), "Mon 25:00") == {"checked": False, "valid": True}
