"""Real outcomes of the nvidia_driver role in the containers: what apt installed from the FAKE
archives (real apt, real pinning, real dpkg holds), and the files the role writes. The side effect
offered a later release of branch 580 after the converges: apt-get upgrade left the held packages
alone, and update.yml's driver step (nvidia_driver_upgrade) moved them together and held them again.
The kernel side (module load, Secure Boot, the cards' real compute capability) is what only the GPU box can show."""

from __future__ import annotations

import re
from typing import Any

UBUNTU = "llmrig-driver-ubuntu"
UBUNTU_PACKAGES = [
    "nvidia-headless-no-dkms-580-server-open",
    "nvidia-utils-580-server",
    "linux-modules-nvidia-580-server-open-generic",
]
CUDA_PACKAGES = ["cuda-keyring", "nvidia-driver-pinning-580", "nvidia-open", "dkms"]
MANAGED = "Ansible managed"
# The later release of branch 580 that the side effect offered, per package.
UPDATED = {
    "nvidia-headless-no-dkms-580-server-open": "580.105.08-0ubuntu0.24.04.1",
    "nvidia-utils-580-server": "580.105.08-0ubuntu0.24.04.1",
    "linux-modules-nvidia-580-server-open-generic": "6.8.0-90.92",
    "nvidia-open": "580.105.08-1",
}
HELD = {UBUNTU: [*UBUNTU_PACKAGES], "llmrig-driver-cuda": ["nvidia-driver-pinning-580", "nvidia-open"]}
PREFIXES = ["nvidia-", "libnvidia-", "linux-modules-nvidia-", "linux-objects-nvidia-", "linux-signatures-nvidia-"]


def _is_ubuntu(host: Any) -> bool:
    return bool(host.backend.get_hostname() == UBUNTU)


def test_the_driver_packages_of_the_source_are_installed(host: Any) -> None:
    """The ubuntu source installs the -server-open packages of branch 580; the cuda source the
    keyring, the branch pin, nvidia-open, DKMS and the running kernel's headers; never the other."""
    wanted, other = (UBUNTU_PACKAGES, CUDA_PACKAGES) if _is_ubuntu(host) else (CUDA_PACKAGES, UBUNTU_PACKAGES)
    for name in wanted:
        assert host.package(name).is_installed, name
        assert host.file(f"/usr/share/llmrig-fake-nvidia/{name}.installed").exists, name
    for name in other:
        assert not host.package(name).is_installed, name
    assert not host.package("nvidia-headless-no-dkms-590-server-open").is_installed
    if not _is_ubuntu(host):
        kernel = host.check_output("uname -r")
        assert host.package(f"linux-headers-{kernel}").is_installed


def test_the_cuda_source_adds_the_repository_and_pins_the_branch(host: Any) -> None:
    """cuda-keyring's source list is in place, the role's pin holds nvidia-open to 580 although
    the repository offers 590, and apt's own policy says so."""
    pin = host.file("/etc/apt/preferences.d/llmrig-nvidia-driver.pref")
    if _is_ubuntu(host):
        assert not pin.exists
        assert not host.file("/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list").exists
        return
    assert host.file("/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list").contains("file:/srv/llmrig-fake-apt/cuda")
    assert pin.mode == 0o644
    assert MANAGED in pin.content_string
    assert "Pin: version 580.*" in pin.content_string
    assert "Pin-Priority: 1001" in pin.content_string
    assert host.package("nvidia-open").version == "580.105.08-1"  # the branch's newest, by update.yml's step
    policy = host.check_output("apt-cache policy nvidia-open")
    assert "590.44.01-1" in policy  # offered
    assert "Candidate: 580.105.08-1" in policy  # but held back by the pin


def test_nouveau_is_blacklisted_and_the_initramfs_rebuilt_once(host: Any) -> None:
    """The blacklist is written, and update-initramfs ran once: in the first converge, not the second."""
    blacklist = host.file("/etc/modprobe.d/llmrig-blacklist-nouveau.conf")
    assert MANAGED in blacklist.content_string
    assert "blacklist nouveau" in blacklist.content_string.splitlines()
    assert host.file("/var/log/llmrig-fake-update-initramfs.log").content_string.splitlines() == ["-u"]


def test_modules_load_at_boot_and_options_file(host: Any) -> None:
    """nvidia, nvidia_uvm and nvidia_modeset are listed in modules-load.d; the options file is managed."""
    modules = host.file("/etc/modules-load.d/llmrig-nvidia.conf").content_string
    assert MANAGED in modules
    assert [line for line in modules.splitlines() if line and not line.startswith("#")] == [
        "nvidia",
        "nvidia_uvm",
        "nvidia_modeset",
    ]
    options = host.file("/etc/modprobe.d/llmrig-nvidia.conf")
    assert options.mode == 0o644
    assert MANAGED in options.content_string


def test_nvidia_persistenced_is_enabled_and_running(host: Any) -> None:
    """The persistence daemon's unit (from the driver package) is enabled and running under systemd."""
    assert host.process.get(pid=1).comm == "systemd"
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert service.is_running


def test_the_role_read_the_fake_driver_state(host: Any) -> None:
    """The loaded-driver file the role checked is the FAKE one the packages installed, naming the open module."""
    banner = host.file("/usr/share/llmrig-fake-nvidia/proc-driver-nvidia-version").content_string
    assert "NVIDIA UNIX Open Kernel Module for x86_64  580.105.08" in banner
    assert "FAKE" in banner
    assert not host.file("/proc/driver/nvidia/version").exists


def _selections(host: Any) -> dict[str, str]:
    """Each installed NVIDIA package (by the role's name prefixes) to its dpkg selection (hold, install)."""
    lines = host.check_output("dpkg-query -W -f='${Package} ${db:Status-Want} ${db:Status-Status}\\n'").splitlines()
    found = {}
    for line in lines:
        name, want, status = line.split()
        if status == "installed" and any(name.startswith(prefix) for prefix in PREFIXES):
            found[name] = want
    return found


def test_every_nvidia_package_is_held(host: Any) -> None:
    """dpkg holds every installed NVIDIA package, the source's own among them, after update.yml's step too."""
    selections = _selections(host)
    assert set(HELD[host.backend.get_hostname()]) <= set(selections), selections
    assert set(selections.values()) == {"hold"}, selections
    assert "cuda-keyring" not in selections
    assert "dkms" not in selections


def test_unattended_upgrades_is_told_to_leave_them_alone(host: Any) -> None:
    """The role's apt.conf.d file lists NVIDIA's name prefixes under Unattended-Upgrade::Package-Blacklist,
    and apt's own configuration reader reads them from it."""
    conf = host.file("/etc/apt/apt.conf.d/52llmrig-nvidia-driver")
    assert conf.mode == 0o644
    assert MANAGED in conf.content_string
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    listed = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "([^"]*)";$', dump, re.MULTILINE)
    assert set(PREFIXES) <= set(listed), dump


def test_apt_get_upgrade_left_the_held_packages_alone(host: Any) -> None:
    """With the later release offered, apt-get upgrade and dist-upgrade (simulated by the side effect,
    before update.yml's step) would install none of the held packages."""
    log = host.file("/var/log/llmrig-test-apt-simulation.log").content_string
    assert len(re.findall(r"^\d+ upgraded, \d+ newly installed", log, re.MULTILINE)) == 2, log
    moved = re.findall(r"^Inst (\S+)", log, re.MULTILINE)
    assert not [name for name in moved if any(name.startswith(prefix) for prefix in PREFIXES)], log


def test_update_moved_them_together_and_held_them_again(host: Any) -> None:
    """update.yml's step upgraded every held package of the source to the branch's later release."""
    for name in HELD[host.backend.get_hostname()]:
        if name in UPDATED:
            assert host.package(name).version == UPDATED[name], name
    assert not host.package("nvidia-headless-no-dkms-590-server-open").is_installed
    assert set(_selections(host).values()) == {"hold"}
