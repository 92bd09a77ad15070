"""The alert rules (roles/monitoring/files/llmrig-alerts.yml) through Debian's real promtool.

`promtool check rules` reads the file as Prometheus does; `promtool test rules` runs the synthetic
series of tests/promtool/*.test.yml. Every alert must have a case that fires it and one that
checks it stays quiet (just below its threshold or window), and the tests must be able to fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO, monitoring_binary

RULES = REPO / "roles" / "monitoring" / "files" / "llmrig-alerts.yml"
TESTS = sorted((REPO / "tests" / "promtool").glob("*.test.yml"))
SEVERITIES = {"critical", "warning", "info"}


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [str(monitoring_binary("promtool")), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def alerts() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    assert [group["name"] for group in groups] == ["llmrig"]
    return {rule["alert"]: rule for rule in groups[0]["rules"]}


def checks() -> list[dict[str, Any]]:
    """Every alert_rule_test entry of every test file."""
    found = []
    for path in TESTS:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert document["rule_files"] == ["../../roles/monitoring/files/llmrig-alerts.yml"], path
        found += [check for case in document["tests"] for check in case.get("alert_rule_test", [])]
    return found


def test_promtool_accepts_the_rules_file() -> None:
    done = promtool("check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_every_promtool_test_passes() -> None:
    assert len(TESTS) >= 3
    done = promtool("test", "rules", *TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("SUCCESS") == len(TESTS)


def test_every_alert_has_a_case_that_fires_it_and_one_that_does_not() -> None:
    fired = {check["alertname"] for check in checks() if check.get("exp_alerts")}
    quiet = {check["alertname"] for check in checks() if not check.get("exp_alerts")}
    assert sorted(set(alerts()) - fired) == []
    assert sorted(set(alerts()) - quiet) == []
    assert sorted((fired | quiet) - set(alerts())) == []  # no test of an alert that is gone


def test_every_alert_has_a_severity_a_summary_and_what_to_do() -> None:
    for name, rule in alerts().items():
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert set(rule["annotations"]) == {"summary", "description"}, name
        assert rule["annotations"]["summary"].strip(), name
        # The description names a command to run or a knob to change.
        assert re.search(r"`[^`]+`", rule["annotations"]["description"]), name


def test_every_alert_has_a_section_in_the_docs() -> None:
    page = (REPO / "docs" / "alerts.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", page, flags=re.MULTILINE))
    assert sorted(set(alerts()) - headings) == []
    assert sorted(headings - set(alerts())) == []


def test_the_tests_fail_when_a_window_or_a_threshold_moves(tmp_path: Path) -> None:
    """Mutants of the rules file (every `for:` one minute shorter, every threshold strictly
    weaker) make promtool's tests fail for the alerts they touch: the quiet cases bite."""
    original = RULES.read_text(encoding="utf-8")
    mutants = {
        "windows": re.sub(r"for: (\d+)m", lambda m: f"for: {int(m.group(1)) - 1}m", original),
        "thresholds": original.replace(" > 0.9", " >= 0.9")
        .replace(" > 85", " >= 85")
        .replace(" < on", " <= on")
        .replace(" > on", " >= on"),
    }
    expected = {
        "windows": {
            "EngineDown",
            "EngineUnhealthy",
            "KVCacheAlmostFull",
            "RequestsWaitingNoneRunning",
            "PreemptionsRising",
            "GpuTemperatureHigh",
            "GpuThermalThrottling",
            "GpuHardwareSlowdown",
            "GpuPowerCapped",
            "ModelsDiskLow",
            "OpenWebUINotReady",
            "BackupFailed",
            "TargetMissing",
            "AlertNotificationsFailing",
            "GatewayBoxOutOfRotation",
            "GatewayNoBoxInRotation",
        },
        "thresholds": {"KVCacheAlmostFull", "GpuTemperatureHigh", "ModelsDiskLow", "BackupStale"},
    }
    for name, text in mutants.items():
        assert text != original, name
        (tmp_path / "roles" / "monitoring" / "files").mkdir(parents=True, exist_ok=True)
        (tmp_path / "roles" / "monitoring" / "files" / RULES.name).write_text(text, encoding="utf-8")
        shutil.copytree(TESTS[0].parent, tmp_path / "tests" / "promtool", dirs_exist_ok=True)
        done = promtool("test", "rules", *sorted((tmp_path / "tests" / "promtool").glob("*.test.yml")))
        assert done.returncode == 1, name
        failed = set(re.findall(r"alertname: (\w+),", done.stdout + done.stderr))
        assert failed == expected[name], name
