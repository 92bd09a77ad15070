"""The NVIDIA driver's decisions (bench/rig/nvidia.py), table-driven over fake probe outputs in
the shapes real hardware prints (tests/fakes/nvidia/, named as fakes)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig import nvidia
from bench.rig.nvidia_probes import parse_lspci_nn, parse_modinfo, parse_proc_version, parse_smi
from tests.helpers import FAKES, load_file_module

FAKE = FAKES / "nvidia"
PLUGIN = FAKES.parent.parent / "ansible" / "plugins" / "filter" / "llmrig.py"


def fake(name: str) -> str:
    return (FAKE / name).read_text(encoding="utf-8")


def state(proc: str = "", modinfo: str = "", smi: str = "", smi_rc: int = 0, lspci: str = "") -> nvidia.DriverState:
    """The state the probes give, each argument a fake file name ('' = the probe found nothing)."""
    return nvidia.driver_state(
        fake(proc) if proc else "",
        fake(modinfo) if modinfo else "",
        fake(smi) if smi else "",
        smi_rc,
        fake(lspci) if lspci else "",
    )


@pytest.mark.parametrize(
    ("lspci", "count"),
    [("lspci-nn-none.txt", 0), ("lspci-nn-one-5060ti.txt", 1), ("lspci-nn-two-5060ti.txt", 2)],
)
def test_lspci_lists_nvidia_display_controllers_only(lspci: str, count: int) -> None:
    """NVIDIA VGA functions count; their audio functions, Intel and AMD graphics do not."""
    found = parse_lspci_nn(fake(lspci))
    assert len(found) == count
    assert all(gpu.device_id == "10de:2d04" for gpu in found)


@pytest.mark.parametrize(
    ("name", "open_modules", "version"),
    [
        ("proc-version-open-580.txt", True, "580.95.05"),
        ("proc-version-open-570.txt", True, "570.195.03"),
        ("proc-version-open-590.txt", True, "590.44.01"),
        ("proc-version-closed-580.txt", False, "580.95.05"),
    ],
)
def test_proc_version_names_the_flavour_and_version(name: str, open_modules: bool, version: str) -> None:
    """ "Open Kernel Module" in the NVRM line is the open flavour; the plain "Kernel Module" is closed."""
    loaded = parse_proc_version(fake(name))
    assert loaded is not None
    assert (loaded.open_modules, loaded.version) == (open_modules, version)


def test_no_version_file_means_no_driver_loaded() -> None:
    """An empty or missing /proc/driver/nvidia/version means nothing is loaded."""
    assert parse_proc_version("") is None


@pytest.mark.parametrize(("name", "open_modules"), [("modinfo-open-580.txt", True), ("modinfo-closed-580.txt", False)])
def test_modinfo_license_tells_the_flavour(name: str, open_modules: bool) -> None:
    """Dual MIT/GPL is the open module, NVIDIA the proprietary one; parm lines with colons are ignored."""
    module = parse_modinfo(fake(name))
    assert module is not None
    assert (module.version, module.open_modules) == ("580.95.05", open_modules)
    assert parse_modinfo("modinfo: ERROR: Module nvidia not found.") is None


def test_smi_csv_with_and_without_header() -> None:
    """nvidia-smi's CSV rows give index, name, compute capability and driver; a header line is skipped."""
    rows = parse_smi("index, name, compute_cap, driver_version\n" + fake("smi-two-5060ti.csv"))
    assert [(gpu.index, gpu.compute_capability, gpu.driver_version) for gpu in rows] == [
        (0, "12.0", "580.95.05"),
        (1, "12.0", "580.95.05"),
    ]
    assert parse_smi(fake("smi-no-driver.txt")) == []


@pytest.mark.parametrize(
    ("gpus", "manage"),
    [([], False), ([{"name": "NVIDIA GeForce RTX 5060 Ti"}], True), ([{"name": "a"}, {"name": "b"}], True)],
    ids=["no-gpu", "one-gpu", "two-gpus"],
)
def test_preflight_decides_whether_the_role_runs(gpus: list[dict[str, Any]], manage: bool) -> None:
    """No NVIDIA GPU: the role is skipped, with one line that says why."""
    decision = nvidia.hardware_decision(gpus, "lspci")
    assert (decision.manage, decision.gpu_count) == (manage, len(gpus))
    assert ("skipped" in decision.line) is not manage
    assert "\n" not in decision.line


GOOD = {"proc": "proc-version-open-580.txt", "modinfo": "modinfo-open-580.txt", "smi": "smi-two-5060ti.csv"}
CHECKS = [
    ("two-5060ti-open-580", GOOD, 2, [], ""),
    ("one-gpu-expected-one", {**GOOD, "smi": "smi-one-5060ti.csv"}, 1, [], ""),
    (
        "one-gpu-expected-two",
        {**GOOD, "smi": "smi-one-5060ti.csv", "lspci": "lspci-nn-two-5060ti.txt"},
        2,
        ["nvidia_driver_gpu_count"],
        "lspci shows 2",
    ),
    (
        "wrong-compute-capability",
        {**GOOD, "smi": "smi-two-4060ti.csv"},
        2,
        ["nvidia_driver_compute_capability", "nvidia_driver_compute_capability"],
        "8.9, expected 12.0",
    ),
    (
        "closed-driver-loaded",
        {**GOOD, "proc": "proc-version-closed-580.txt", "modinfo": "modinfo-closed-580.txt"},
        2,
        ["nvidia_driver_source"],
        "open modules",
    ),
    (
        "branch-below-floor",
        {**GOOD, "proc": "proc-version-open-570.txt", "modinfo": ""},
        2,
        ["nvidia_driver_branch"],
        "below branch 580",
    ),
    (
        "other-branch-loaded",
        {**GOOD, "proc": "proc-version-open-590.txt", "modinfo": ""},
        2,
        ["nvidia_driver_branch"],
        "branch 580 is pinned",
    ),
    (
        "installed-not-loaded",
        {**GOOD, "proc": "", "smi": "smi-no-driver.txt", "smi_rc": 9},
        2,
        ["reboot"],
        "reboot the host",
    ),
    ("loaded-but-smi-fails", {**GOOD, "smi": "smi-no-driver.txt", "smi_rc": 9}, 2, ["reboot"], "nvidia-smi"),
]


@pytest.mark.parametrize(("case", "probes", "count", "variables", "text"), CHECKS, ids=[row[0] for row in CHECKS])
def test_checks_after_the_reboot_name_what_fixes_them(
    case: str, probes: dict[str, Any], count: int, variables: list[str], text: str
) -> None:
    """Each failed check names the knob to change (or the reboot to do) and says what it found."""
    problems = nvidia.driver_problems(state(**probes), 580, count, "12.0")
    assert [problem.variable for problem in problems] == variables
    assert all(problem.severity == "error" for problem in problems)
    if text:
        assert text in problems[0].message, problems[0].message


@pytest.mark.parametrize(
    ("probes", "pending"),
    [
        (GOOD, False),  # the module on disk is the one loaded
        ({**GOOD, "proc": ""}, True),  # installed, not loaded yet
        ({**GOOD, "proc": "proc-version-open-590.txt"}, True),  # another version loaded than on disk
        ({**GOOD, "modinfo": ""}, False),  # modinfo finds nothing (a container): nothing to say
    ],
)
def test_a_driver_on_disk_that_is_not_loaded_is_a_pending_reboot(probes: dict[str, Any], pending: bool) -> None:
    """A reboot is pending when modinfo's version is not the loaded one, so the next run continues."""
    assert state(**probes).reboot_pending is pending


LOADED = {"proc": "proc-version-open-580.txt", "modinfo": "modinfo-open-580.txt", "smi": "smi-two-5060ti.csv"}
NOT_LOADED = {"modinfo": "modinfo-open-580.txt", "smi": "smi-no-driver.txt", "smi_rc": 9}
REBOOTS = [
    ("changed-reboot-allowed", True, LOADED, True, "ssh", False, "reboot", ""),
    ("changed-reboot-not-allowed", True, LOADED, False, "ssh", False, "stop", "nvidia_driver_reboot_allowed is false"),
    ("changed-local-connection", True, LOADED, True, "local", False, "stop", "connection local"),
    ("pending-from-an-earlier-run", False, NOT_LOADED, False, "ssh", False, "stop", "run ansible-playbook site.yml"),
    ("pending-reboot-allowed", False, NOT_LOADED, True, "ssh", False, "reboot", ""),
    ("nothing-changed", False, LOADED, True, "ssh", False, "continue", "nothing to load"),
    ("test-container", True, LOADED, True, "podman", True, "continue", "nvidia_driver_test_no_kernel"),
]


@pytest.mark.parametrize(
    ("case", "changed", "probes", "allowed", "connection", "no_kernel", "action", "text"),
    REBOOTS,
    ids=[row[0] for row in REBOOTS],
)
def test_reboot_only_when_allowed_and_not_local(  # noqa: PLR0917 one argument per table column
    case: str,
    changed: bool,
    probes: dict[str, Any],
    allowed: bool,
    connection: str,
    no_kernel: bool,
    action: str,
    text: str,
) -> None:
    """A change reboots only when allowed over a remote connection; otherwise one message stops the play."""
    decision = nvidia.reboot_decision(changed, state(**probes), allowed, connection, no_kernel)
    assert decision.action == action
    assert text in decision.message
    if action == "stop":
        assert "\n" not in decision.message
        assert "reboot the host" in decision.message


def test_the_filter_hands_the_role_errors_and_the_reboot_decision() -> None:
    """llmrig_nvidia_state (the role's one call) renders the checks and the decision from raw probe text."""
    filters = load_file_module(PLUGIN, "llmrig_filters_nvidia").FilterModule().filters()
    expected = {
        "branch": "580",
        "gpu_count": "2",
        "compute_capability": "12.0",
        "reboot_allowed": "False",
        "connection": "ssh",
        "no_kernel": "False",
    }
    modinfo, no_driver = fake("modinfo-open-580.txt"), fake("smi-no-driver.txt")
    probes = {"proc_version": "", "modinfo": modinfo, "smi": no_driver, "smi_rc": "9"}
    report = filters["llmrig_nvidia_state"](probes, expected)
    assert report["errors"][0].startswith("reboot: no NVIDIA kernel module is loaded")
    assert report["reboot_pending"] is True
    assert report["reboot"]["action"] == "stop"
    loaded, listed = fake("proc-version-open-580.txt"), fake("smi-two-5060ti.csv")
    good = {"proc_version": loaded, "modinfo": "", "smi": listed, "smi_rc": 0}
    report = filters["llmrig_nvidia_state"](good, {**expected, "reboot_allowed": "true"})
    assert report["errors"] == []
    assert report["summary"].startswith("NVIDIA open kernel module 580.95.05 loaded")
    skip = filters["llmrig_nvidia_hardware"]({"gpus": [], "gpu_source": "none"})
    assert skip == {"manage": False, "gpu_count": 0, "line": nvidia.hardware_decision([], "none").line}
