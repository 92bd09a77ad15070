"""Real outcomes of the nvidia_driver role in the containers: what apt installed from the FAKE
archives (real apt, real pinning), and the files the role writes. The kernel side (module load,
Secure Boot, the cards' real compute capability) is what only the GPU box can show."""

from __future__ import annotations

from typing import Any

UBUNTU = "llmrig-driver-ubuntu"
UBUNTU_PACKAGES = [
    "nvidia-headless-no-dkms-580-server-open",
    "nvidia-utils-580-server",
    "linux-modules-nvidia-580-server-open-generic",
]
CUDA_PACKAGES = ["cuda-keyring", "nvidia-driver-pinning-580", "nvidia-open", "dkms"]
MANAGED = "Ansible managed"


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
    assert host.package("nvidia-open").version == "580.95.05-1"
    policy = host.check_output("apt-cache policy nvidia-open")
    assert "590.44.01-1" in policy  # offered
    assert "Candidate: 580.95.05-1" in policy  # but held back by the pin


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
    assert "NVIDIA UNIX Open Kernel Module for x86_64  580.95.05" in banner
    assert "FAKE" in banner
    assert not host.file("/proc/driver/nvidia/version").exists
