#!/usr/bin/env python3
"""FAKE apt archives for the nvidia_driver molecule scenario, built with dpkg-deb in the test
container: packages that carry the real names the role installs, each holding a marker file
under /usr/share/llmrig-fake-nvidia/ and, where the role reads them, FAKES of nvidia-smi, of
/proc/driver/nvidia/version (at /usr/share/llmrig-fake-nvidia/proc-driver-nvidia-version, which
the scenario points nvidia_driver_proc_version_path at) and of nvidia-persistenced. Nothing here
is NVIDIA's or Canonical's; only the names and version formats follow theirs.

    build_fake_apt_archive.py OUT KERNEL_RELEASE FAKE_NVIDIA_SMI

OUT/ubuntu/ stands in for Ubuntu's archive, OUT/cuda/ for NVIDIA's CUDA repository, and
OUT/cuda-keyring_1.1-1_all.deb for NVIDIA's keyring package: it installs a key file and a source
list that points apt at OUT/cuda/, as the real one points it at NVIDIA's repository.
The CUDA repository holds nvidia-open in branches 580 and 590, so only the role's pin keeps 590 out.
OUT/updates/ is a later release of branch 580 of both sources' packages; no source list names it
until the scenario's side effect adds one (the held packages must not move, then update.yml's step
moves them).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

FAKE_DIR = "usr/share/llmrig-fake-nvidia"
OPEN_BANNER = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  (FAKE for tests)"
    "  Thu Jan  1 00:00:00 UTC 2026\n"
)
PERSISTENCED_UNIT = """[Unit]
Description=FAKE NVIDIA Persistence Daemon (test package)

[Service]
ExecStart=/usr/bin/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""
# What dh_installsystemd's postinst does in the real packages: systemd learns the new unit.
POSTINST_RELOAD = (
    "#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then systemctl --system daemon-reload || true; fi\n"
)
PERSISTENCED = "#!/bin/sh\n# FAKE nvidia-persistenced for tests: stays up and does nothing.\nexec sleep infinity\n"


def build(pool: Path, name: str, version: str, files: dict[str, tuple[str, int]], arch: str = "amd64") -> Path:
    """One .deb with a marker file plus ``files`` (path -> (text, mode)); returns its path."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        control = (
            f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\n"
            "Maintainer: llmrig tests <tests@llmrig.invalid>\n"
            f"Description: FAKE {name} for the nvidia_driver molecule scenario\n"
        )
        (root / "DEBIAN" / "control").write_text(control, encoding="utf-8")
        if any(path.endswith(".service") for path in files):
            (root / "DEBIAN" / "postinst").write_text(POSTINST_RELOAD, encoding="utf-8")
            (root / "DEBIAN" / "postinst").chmod(0o755)
        marker = {f"{FAKE_DIR}/{name}.installed": (f"FAKE package {name} {version}\n", 0o644)}
        for path, (text, mode) in {**marker, **files}.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            target.chmod(mode)
        deb = pool / f"{name}_{version}_{arch}.deb"
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, capture_output=True
        )
        return deb


def index(repo: Path) -> None:
    """Packages and Release of a flat repository (``deb [trusted=yes] file:REPO ./``)."""
    stanzas = []
    for deb in sorted(repo.glob("*.deb")):
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
        data = deb.read_bytes()
        stanzas.append(
            control.rstrip("\n")
            + f"\nFilename: ./{deb.name}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    packages = "\n".join(stanzas).encode()
    (repo / "Packages").write_bytes(packages)
    release = (
        "Origin: llmrig-fake\nLabel: llmrig-fake\nDate: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n"
        f" {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages\n"
    )
    (repo / "Release").write_text(release, encoding="utf-8")


def main(out: Path, kernel: str, smi: Path) -> None:
    ubuntu, cuda = out / "ubuntu", out / "cuda"
    ubuntu.mkdir(parents=True, exist_ok=True)
    cuda.mkdir(parents=True, exist_ok=True)
    smi_file = {"usr/bin/nvidia-smi": (smi.read_text(encoding="utf-8"), 0o755)}
    persistenced = {
        "lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644),
        "usr/bin/nvidia-persistenced": (PERSISTENCED, 0o755),
    }

    def loaded(version: str) -> dict[str, tuple[str, int]]:
        return {f"{FAKE_DIR}/proc-driver-nvidia-version": (OPEN_BANNER.format(v=version), 0o644)}

    ubuntu_version = "580.95.05-0ubuntu0.24.04.2"
    build(ubuntu, "nvidia-headless-no-dkms-580-server-open", ubuntu_version, persistenced)
    build(ubuntu, "nvidia-utils-580-server", ubuntu_version, smi_file)
    build(ubuntu, "linux-modules-nvidia-580-server-open-generic", "6.8.0-90.91", loaded("580.95.05"))
    build(ubuntu, "nvidia-headless-no-dkms-590-server-open", "590.44.01-0ubuntu0.24.04.1", persistenced)
    index(ubuntu)

    build(cuda, "nvidia-driver-pinning-580", "580.95.05-1", {}, arch="all")
    build(cuda, "nvidia-open", "580.95.05-1", {**smi_file, **persistenced, **loaded("580.95.05")})
    build(cuda, "nvidia-open", "590.44.01-1", {**smi_file, **persistenced, **loaded("590.44.01")})
    build(cuda, "dkms", "3.0.11-1ubuntu13", {})
    build(cuda, f"linux-headers-{kernel}", "1.0-1", {})
    index(cuda)

    updates = out / "updates"
    updates.mkdir(parents=True, exist_ok=True)
    newer = "580.105.08-0ubuntu0.24.04.1"
    build(updates, "nvidia-headless-no-dkms-580-server-open", newer, persistenced)
    build(updates, "nvidia-utils-580-server", newer, smi_file)
    build(updates, "linux-modules-nvidia-580-server-open-generic", "6.8.0-90.92", loaded("580.105.08"))
    build(updates, "nvidia-open", "580.105.08-1", {**smi_file, **persistenced, **loaded("580.105.08")})
    index(updates)

    source = f"deb [trusted=yes] file:{cuda} ./\n"
    keyring = {
        "usr/share/keyrings/cuda-archive-keyring.gpg": ("FAKE key for tests\n", 0o644),
        "etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list": (source, 0o644),
    }
    deb = build(out, "cuda-keyring", "1.1-1", keyring, arch="all")
    deb.rename(out / "cuda-keyring_1.1-1_all.deb")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
