"""The nvidia_driver role's hold of NVIDIA's packages, rendered by real Ansible: the apt.conf.d file
that keeps unattended-upgrades off them (read back by this host's real apt-config), the name
pattern the dpkg holds select with, and update.yml as the one run that moves them. The holds
themselves, apt-get upgrade leaving them alone and update.yml's step moving them are shown under
real apt and dpkg by the role's molecule scenario (roles/nvidia_driver/molecule/default)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, ansible_render

pytestmark = pytest.mark.ansible

TEMPLATE = "roles/nvidia_driver/templates/llmrig-nvidia-unattended.conf.j2"


def _role_vars() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text(encoding="utf-8")))


def test_the_blacklist_file_lists_every_prefix_and_apt_reads_it(tmp_path: Path) -> None:
    """The rendered file says it is managed, and apt-config reads each of the role's name prefixes
    from it as an entry of Unattended-Upgrade::Package-Blacklist."""
    prefixes = _role_vars()["_nvidia_driver_held_prefixes"]
    text = ansible_render(
        f"{{{{ lookup('ansible.builtin.template', '{TEMPLATE}') }}}}", {"_nvidia_driver_held_prefixes": prefixes}
    )
    assert "Ansible managed" in text
    conf = tmp_path / "52llmrig-nvidia-driver"
    conf.write_text(text, encoding="utf-8")
    apt_config = shutil.which("apt-config")
    if apt_config is None:
        pytest.fail("apt-config is missing: the tier runs on Debian bookworm or Ubuntu 24.04, which carry it")
    dump = subprocess.run(
        [apt_config, "-c", str(conf), "dump", "Unattended-Upgrade::Package-Blacklist"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    listed = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "([^"]*)";$', dump, re.MULTILINE)
    assert listed == prefixes
    assert {"nvidia-", "libnvidia-", "linux-modules-nvidia-"} <= set(listed)


def test_the_hold_pattern_takes_nvidias_packages_and_nothing_else() -> None:
    """The pattern the holds select installed packages with: the driver's and the pre-signed
    modules' packages of both sources, not the keyring, DKMS, headers or the kernel."""
    role = _role_vars()
    names = [
        "nvidia-utils-580-server",
        "nvidia-headless-no-dkms-580-server-open",
        "libnvidia-compute-580-server",
        "linux-modules-nvidia-580-server-open-generic",
        "linux-modules-nvidia-580-server-open-6.8.0-90-generic",
        "linux-signatures-nvidia-6.8.0-90-generic",
        "nvidia-open",
        "nvidia-driver-pinning-580",
        "cuda-keyring",
        "dkms",
        "linux-headers-6.8.0-90-generic",
        "linux-image-6.8.0-90-generic",
        "libnvme1",
    ]
    selected = ansible_render(
        "{{ names | select('match', _nvidia_driver_held_pattern) | list }}",
        {"names": names, **{key: role[key] for key in ("_nvidia_driver_held_pattern", "_nvidia_driver_held_prefixes")}},
    )
    assert selected == names[:8]


def test_update_yml_is_the_one_run_that_moves_them() -> None:
    """playbooks/update.yml gives the engine plays nvidia_driver_upgrade: true; no other playbook sets
    it, and the role's default is false."""
    setters = []
    for path in [REPO / "site.yml", *sorted((REPO / "playbooks").glob("*.yml"))]:
        for play in yaml.safe_load(path.read_text(encoding="utf-8")):
            if "nvidia_driver_upgrade" in str(play):
                setters.append((path.name, play.get("vars", {}).get("nvidia_driver_upgrade")))
    assert setters == [("update.yml", True)]
    defaults = yaml.safe_load((REPO / "roles" / "nvidia_driver" / "defaults" / "main.yml").read_text(encoding="utf-8"))
    assert defaults["nvidia_driver_upgrade"] is False
