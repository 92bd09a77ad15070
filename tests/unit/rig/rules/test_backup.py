"""bench.rig.rules.backup on its own: every repository form the role sets up passes, each refusal
is one line naming its knob, and no secret (the repository, the password, the backend's variables,
the heartbeat URL) is ever quoted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.rig.presets import Preset
from bench.rig.rules.backup import CALENDAR_KNOBS, rule_backup
from tests.helpers import GROUP_VARS, REPO

DEFAULTS: dict[str, Any] = yaml.safe_load((GROUP_VARS / "backup.yml").read_text(encoding="utf-8"))
KNOBS: dict[str, Any] = {**DEFAULTS, "backup_repository": "/mnt/nas/llmrig", "backup_password": "pfRepoPassword1"}
PRESET: Any = Preset  # the rule does not read the preset


def _lines(overrides: dict[str, Any], host: dict[str, Any] | None = None) -> list[str]:
    return [problem.render() for problem in rule_backup({**KNOBS, **overrides}, host or {}, "cpu", PRESET)]


def test_the_shipped_defaults_pass() -> None:
    """backup_repository '' (no backups) with every other default, and the defaults with a repository."""
    assert [p.render() for p in rule_backup(DEFAULTS, {}, "cpu", PRESET)] == []
    assert _lines({}) == []


REPOSITORIES = [
    "/mnt/nas/llmrig",
    "/srv/restic",
    "sftp:backup@nas.lan:/srv/restic/llmrig",
    "sftp:nas.lan:llmrig",  # relative to the user's home
    "sftp://backup@nas.lan:2222//srv/restic/llmrig",
    "s3:https://s3.example.org/llmrig-backups",
    "s3:https://s3.example.org/llmrig-backups/box1",
    "s3:http://minio.lan:9000/llmrig",
    "s3:s3.amazonaws.com/llmrig-backups",
    "s3:s3.eu-central-1.amazonaws.com/llmrig-backups/box1",
    "rest:https://backup.lan:8000/llmrig",
    "rest:http://backup.lan:8000/",
    "rest:https://user:pw@backup.lan:8000/user/",
]


@pytest.mark.parametrize("repository", REPOSITORIES)
def test_each_repository_form_passes(repository: str) -> None:
    assert _lines({"backup_repository": repository}) == []


def test_with_no_repository_nothing_else_is_read() -> None:
    """The role then only stops the timers: a missing password or an empty schedule is no error."""
    assert _lines({"backup_repository": "", "backup_password": "", "backup_schedule": "", "backup_keep_daily": 0}) == []


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"backup_repository": "backups/llmrig"},
            "backup_repository: is a relative path; use an absolute path, sftp:user@host:/path, "
            "s3:https://host/bucket or rest:https://host:8000/path",
        ),
        (
            {"backup_repository": "b2:bucket:llmrig"},
            "backup_repository: uses restic's b2: backend, which llmrig does not set up; use an absolute path, "
            "sftp:user@host:/path, s3:https://host/bucket or rest:https://host:8000/path",
        ),
        (
            {"backup_repository": "/mnt/nas/llm rig"},
            "backup_repository: holds whitespace or a control character; use an absolute path, "
            "sftp:user@host:/path, s3:https://host/bucket or rest:https://host:8000/path",
        ),
        (
            {"backup_repository": "sftp:nas.lan"},
            "backup_repository: is not sftp:user@host:/path (or sftp://user@host:port//path)",
        ),
        (
            {"backup_repository": "s3:https://s3.example.org/"},
            "backup_repository: names no bucket; use s3:https://host/bucket[/path]",
        ),
        (
            {"backup_repository": "s3:llmrig-backups"},
            "backup_repository: is not s3:https://host/bucket[/path] (or s3:s3.amazonaws.com/bucket)",
        ),
        (
            {"backup_repository": "rest:ftp://backup.lan/llmrig"},
            "backup_repository: the REST server is not an http(s) URL with a host; use rest:https://host:8000/path",
        ),
        (
            {"backup_password": ""},
            "backup_password: is empty and so is backup_password_file: the repository needs a password "
            "(a vault value, or a file)",
        ),
        (
            {"backup_password": "", "backup_password_file": "secrets/restic"},
            "backup_password_file: must be an absolute path on the controller",
        ),
        (
            {"backup_password": "", "backup_password_file": "/nonexistent/restic-password"},
            "backup_password_file: /nonexistent/restic-password does not exist on the controller",
        ),
        ({"backup_keep_daily": 0}, "backup_keep_daily: must be at least 1, got 0"),
        ({"backup_keep_weekly": -1}, "backup_keep_weekly: must be at least 1, got -1"),
        ({"backup_keep_monthly": "0"}, "backup_keep_monthly: must be at least 1, got '0'"),
        ({"backup_max_age_h": 0}, "backup_max_age_h: must be at least 1, got 0"),
        (
            {"backup_environment": ["AWS_ACCESS_KEY_ID=AKIAPF0123"]},
            "backup_environment: must be a mapping of variable names to strings (value not shown)",
        ),
        (
            {"backup_environment": {"aws-key": "AKIAPF0123"}},
            "backup_environment: 'aws-key' is not an environment variable name (A-Z, 0-9 and _, "
            "not starting with a digit)",
        ),
        (
            {"backup_environment": {"RESTIC_PASSWORD": "pfOtherPassword"}},
            "backup_environment: sets RESTIC_PASSWORD, which the role sets itself from backup_repository and "
            "the password; remove it",
        ),
        (
            {"backup_environment": {"AWS_SECRET_ACCESS_KEY": 12345678}},
            "backup_environment: AWS_SECRET_ACCESS_KEY must be a string; quote it (value not shown)",
        ),
        (
            {"backup_heartbeat_url": "hc-ping.com/pf-token-0123"},
            "backup_heartbeat_url: is not an http(s) URL with a host (value not shown: it may carry a token)",
        ),
        (
            {"backup_check_read_data_subset": "5"},
            "backup_check_read_data_subset: '5' is not restic's --read-data-subset (such as 5%, 1/7, 500M; "
            "'' = the structure only)",
        ),
        (
            {"backup_check_read_data_subset": "8/7"},
            "backup_check_read_data_subset: '8/7' is not restic's --read-data-subset (such as 5%, 1/7, 500M; "
            "'' = the structure only)",
        ),
        (
            {"backup_schedule": ""},
            "backup_schedule: is empty: give a systemd OnCalendar expression "
            "(such as *-*-* 03:30:00, Sun *-*-* 05:00:00 or daily)",
        ),
        (
            {"backup_check_schedule": "daily\nExecStart=/bin/sh"},
            "backup_check_schedule: 'daily\\nExecStart=/bin/sh' is not a systemd OnCalendar expression "
            "(such as *-*-* 03:30:00, Sun *-*-* 05:00:00 or daily)",
        ),
    ],
)
def test_each_refusal_is_one_line_naming_its_knob(overrides: dict[str, Any], line: str) -> None:
    assert _lines(overrides) == [line]


@pytest.mark.parametrize(
    "secret",
    [
        {"backup_repository": "rest:ftp://user:Sekrit0@backup.lan/"},
        {"backup_repository": "s3:https://Sekrit1:Sekrit2@s3.example.org/"},
        {"backup_repository": "sftp:Sekrit3"},
        {"backup_heartbeat_url": "ftp://hc.example/Sekrit4"},
        {"backup_environment": {"RESTIC_PASSWORD_COMMAND": "echo Sekrit5"}},
        {"backup_environment": {"B2_ACCOUNT_KEY": ["Sekrit6"]}},
        {"backup_environment": "AWS_SECRET_ACCESS_KEY=Sekrit7"},
    ],
)
def test_no_message_quotes_a_secret(secret: dict[str, Any]) -> None:
    """The repository, the backend's variables and the heartbeat URL may carry credentials."""
    lines = _lines(secret)
    assert len(lines) == 1, lines
    assert "Sekrit" not in lines[0], lines


@pytest.mark.parametrize("subset", ["", "5%", "2.5%", "100%", "1/7", "7/7", "500M", "2G", "1T", "64k"])
def test_restics_read_data_subset_forms_pass(subset: str) -> None:
    assert _lines({"backup_check_read_data_subset": subset}) == []


@pytest.mark.parametrize("schedule", ["daily", "weekly", "Mon..Fri 22:00", "*-*-* 00/6:00:00", "03:30 Europe/Berlin"])
def test_calendar_expressions_pass(schedule: str) -> None:
    assert _lines({"backup_schedule": schedule, "backup_check_schedule": schedule}) == []


def test_a_schedule_systemd_analyze_refused_on_the_host_is_refused() -> None:
    """The host facts say whether systemd-analyze calendar took each schedule; a refusal names the knob."""
    host = {"calendars": {"backup_schedule": {"checked": True, "valid": False}}}
    assert _lines({"backup_schedule": "Mon 25:00"}, host) == [
        "backup_schedule: 'Mon 25:00' is refused by systemd-analyze calendar on the host "
        "(such as *-*-* 03:30:00, Sun *-*-* 05:00:00 or daily)"
    ]
    unchecked = {"calendars": {"backup_schedule": {"checked": False, "valid": True}}}
    assert _lines({"backup_schedule": "Mon 25:00"}, unchecked) == []


def _password_file(tmp_path: Path, text: str, mode: int) -> str:
    path = tmp_path / "restic-password"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return str(path)


def test_a_password_file_on_the_controller_only_its_owner_reads_passes(tmp_path: Path) -> None:
    path = _password_file(tmp_path, "pfFilePassword\n", 0o600)
    assert _lines({"backup_password": "", "backup_password_file": path}) == []
    assert _lines({"backup_password": "", "backup_password_file": _password_file(tmp_path, "x", 0o400)}) == []


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        ("pfFilePassword\n", 0o644, "has mode 0644: its group or others may read or change it; chmod 600 it"),
        ("pfFilePassword\n", 0o640, "has mode 0640: its group or others may read or change it; chmod 600 it"),
        ("pfFilePassword\n", 0o620, "has mode 0620: its group or others may read or change it; chmod 600 it"),
        ("\n", 0o600, "is empty"),
        ("", 0o600, "is empty"),
    ],
)
def test_a_password_file_others_read_or_an_empty_one_is_refused(
    tmp_path: Path, text: str, mode: int, says: str
) -> None:
    path = _password_file(tmp_path, text, mode)
    assert _lines({"backup_password": "", "backup_password_file": path}) == [f"backup_password_file: {path} {says}"]


def test_a_password_file_is_not_read_while_backup_password_is_set(tmp_path: Path) -> None:
    path = _password_file(tmp_path, "", 0o644)
    assert _lines({"backup_password_file": path}) == []
    assert _lines({"backup_password_file": str(tmp_path)}) == []


def test_a_folder_as_password_file_is_refused(tmp_path: Path) -> None:
    assert _lines({"backup_password": "", "backup_password_file": str(tmp_path)}) == [
        f"backup_password_file: {tmp_path} is not a file"
    ]


def test_preflight_checks_exactly_the_calendar_knobs_on_the_host() -> None:
    tasks = yaml.safe_load((REPO / "roles/preflight/tasks/facts.yml").read_text(encoding="utf-8"))
    probes = [task["llmrig_host_facts"]["calendars"] for task in tasks if "llmrig_host_facts" in task]
    assert probes == [{name: f"{{{{ {name} }}}}" for name in CALENDAR_KNOBS}]
