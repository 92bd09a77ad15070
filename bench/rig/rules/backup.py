"""Rules on the backup knobs (``backup_*``, roles/backup): a restic repository of a form the role
sets up, a password for it (a file of it on the controller kept from everyone but its owner),
the backend's variables, retention and alert ages of at least 1, restic's --read-data-subset, a
heartbeat URL and two systemd OnCalendar expressions (which ``systemd-analyze calendar`` on the
host checks through the host facts). With ``backup_repository`` empty only its form is checked:
the role then reads no other knob but to stop the timers.

The repository, the password, the backend's variables and the heartbeat URL may carry
credentials: a message names the knob and the rule, never the value. Preflight runs these rules
in a filter, on the controller, so the password file is looked at where the role's ``file``
lookup reads it.
"""

from __future__ import annotations

import os
import re
import stat
import urllib.parse
from collections.abc import Mapping

from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_int, as_str, err

FORMS = "an absolute path, sftp:user@host:/path, s3:https://host/bucket or rest:https://host:8000/path"
# The variables llmrig-backup sets itself from backup_repository and the password file.
RESERVED_ENVIRONMENT = ("RESTIC_REPOSITORY", "RESTIC_PASSWORD", "RESTIC_PASSWORD_FILE", "RESTIC_PASSWORD_COMMAND")
AT_LEAST_ONE = ("backup_keep_daily", "backup_keep_weekly", "backup_keep_monthly", "backup_max_age_h")
# The schedules, each probed by the llmrig_host_facts module (roles/preflight/tasks/facts.yml);
# a test keeps the two in step.
CALENDAR_KNOBS = ("backup_schedule", "backup_check_schedule")
CALENDAR_EXAMPLES = "such as *-*-* 03:30:00, Sun *-*-* 05:00:00 or daily"
# What an OnCalendar expression is written with: weekday and shorthand names, digits, * - : , . / ~ +,
# spaces and a time zone name. Anything else (a line break, %, quotes) is no calendar and would
# reach the timer unit as it is.
_CALENDAR = re.compile(r"[A-Za-z0-9*,.:/~+_ -]+")
_ENVIRONMENT_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
# sftp:[user@]host:path (scp's form; a relative path is under the user's home).
_SFTP = re.compile(r"(?:[^@/:\s]+@)?[^@/:\s]+:.+")
# s3:host/bucket[/path] (the S3 endpoint without a scheme: https).
_S3_HOST = re.compile(r"[A-Za-z0-9.-]+(?::\d+)?/[^/]+(?:/.*)?")
_SPACE = re.compile(r"\s")
# restic's --read-data-subset: n/t, x% and a size with K, M, G or T.
_FRACTION = re.compile(r"(\d+)/(\d+)")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")
_SIZE = re.compile(r"(\d+)[KMGTkmgt]")


def _url_problem(url: str, what: str) -> str:
    """Why ``url`` is no http(s) URL with a host for ``what`` ('' when it is one)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, _ = parts.hostname, parts.port  # a port that is no number raises
    except ValueError:
        return f"{what} is not an http(s) URL with a host"
    if parts.scheme not in ("http", "https") or not host:
        return f"{what} is not an http(s) URL with a host"
    return ""


def _sftp_problem(rest: str) -> str:
    if rest.startswith("//"):
        parts = urllib.parse.urlsplit(f"sftp:{rest}")
        if parts.hostname and parts.path.strip("/"):
            return ""
    elif _SFTP.fullmatch(rest):
        return ""
    return "is not sftp:user@host:/path (or sftp://user@host:port//path)"


def _s3_problem(rest: str) -> str:
    if not rest.startswith(("http://", "https://")):
        return (
            "" if _S3_HOST.fullmatch(rest) else "is not s3:https://host/bucket[/path] (or s3:s3.amazonaws.com/bucket)"
        )
    if problem := _url_problem(rest, "the S3 endpoint"):
        return f"{problem}; use s3:https://host/bucket[/path]"
    if not urllib.parse.urlsplit(rest).path.strip("/"):
        return "names no bucket; use s3:https://host/bucket[/path]"
    return ""


def _rest_problem(rest: str) -> str:
    problem = _url_problem(rest, "the REST server")
    return f"{problem}; use rest:https://host:8000/path" if problem else ""


# The restic backends the role sets up, each with what is after its "name:".
_BACKENDS = {"sftp": _sftp_problem, "s3": _s3_problem, "rest": _rest_problem}


def repository_problem(repository: str) -> str:
    """Why ``repository`` is not a restic repository llmrig sets up ('' when it is one, or empty).
    The message never quotes it: a URL may carry a user and password."""
    if not repository:
        return ""
    if _SPACE.search(repository) or not repository.isprintable():
        return f"holds whitespace or a control character; use {FORMS}"
    if repository.startswith("/"):
        return ""
    scheme = _SCHEME.match(repository)
    if scheme is None:
        return f"is a relative path; use {FORMS}"
    name = scheme.group(1)
    backend = _BACKENDS.get(name)
    if backend is None:
        return f"uses restic's {name}: backend, which llmrig does not set up; use {FORMS}"
    return backend(repository[len(name) + 1 :])


def _password_file_problem(path: str) -> str:
    """Why the password file (on this machine, the controller) cannot serve ('' when it can)."""
    if not path.startswith(("/", "~")):
        return "must be an absolute path on the controller"
    where = os.path.expanduser(path)
    try:
        status = os.stat(where)
    except FileNotFoundError:
        return f"{path} does not exist on the controller"
    except OSError as exc:
        return f"{path} cannot be read on the controller ({exc.strerror})"
    if not stat.S_ISREG(status.st_mode):
        return f"{path} is not a file"
    if status.st_mode & 0o077:
        mode = stat.S_IMODE(status.st_mode)
        return f"{path} has mode {mode:04o}: its group or others may read or change it; chmod 600 it"
    try:
        with open(where, encoding="utf-8") as handle:
            empty = not handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        return f"{path} cannot be read on the controller ({reason})"
    return f"{path} is empty" if empty else ""


def _password(knobs: Knobs) -> list[Problem]:
    """A password, from the vault value or a file on the controller that only its owner reads."""
    if as_str(knobs, "backup_password"):
        return []
    path = as_str(knobs, "backup_password_file")
    if not path:
        return err(
            "backup_password",
            "is empty and so is backup_password_file: the repository needs a password (a vault value, or a file)",
        )
    problem = _password_file_problem(path)
    return err("backup_password_file", problem) if problem else []


def _environment(knobs: Knobs) -> list[Problem]:
    """A mapping of environment variable names to strings, without the ones the role sets."""
    environment = knobs.get("backup_environment")
    if environment in (None, ""):
        return []
    if not isinstance(environment, Mapping):
        return err("backup_environment", "must be a mapping of variable names to strings (value not shown)")
    problems: list[Problem] = []
    for name, value in environment.items():
        if not isinstance(name, str) or not _ENVIRONMENT_NAME.fullmatch(name):
            problems += err(
                "backup_environment",
                f"{str(name)[:40]!r} is not an environment variable name (A-Z, 0-9 and _, not starting with a digit)",
            )
        elif name in RESERVED_ENVIRONMENT:
            problems += err(
                "backup_environment",
                f"sets {name}, which the role sets itself from backup_repository and the password; remove it",
            )
        elif not isinstance(value, str):
            problems += err("backup_environment", f"{name} must be a string; quote it (value not shown)")
    return problems


def _subset_problem(subset: str) -> bool:
    """Whether ``subset`` is not restic's --read-data-subset ('' is: the structure only)."""
    if not subset:
        return False
    if fraction := _FRACTION.fullmatch(subset):
        part, whole = int(fraction.group(1)), int(fraction.group(2))
        return not 1 <= part <= whole
    if percent := _PERCENT.fullmatch(subset):
        return not 0 < float(percent.group(1)) <= 100
    if size := _SIZE.fullmatch(subset):
        return int(size.group(1)) < 1
    return True


def calendar_problem(knobs: Knobs, host: Host, name: str) -> str:
    """Why ``knobs[name]`` is not a systemd OnCalendar expression ('' when it is one): empty, a
    character no calendar holds, or refused by ``systemd-analyze calendar`` on the host."""
    value = as_str(knobs, name)
    if not value:
        return f"is empty: give a systemd OnCalendar expression ({CALENDAR_EXAMPLES})"
    if not _CALENDAR.fullmatch(value):
        return f"{value!r} is not a systemd OnCalendar expression ({CALENDAR_EXAMPLES})"
    probed = (host.get("calendars") or {}).get(name)
    if isinstance(probed, Mapping) and probed.get("valid") is False:
        return f"{value!r} is refused by systemd-analyze calendar on the host ({CALENDAR_EXAMPLES})"
    return ""


def rule_backup(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """backup_repository is '' or of a form llmrig sets up; with it set: a password, the backend's
    variables, counts of at least 1, restic's subset, an http(s) heartbeat and two calendars."""
    repository = as_str(knobs, "backup_repository")
    if problem := repository_problem(repository):
        return err("backup_repository", problem)
    if not repository:
        return []
    problems = _password(knobs)
    problems += _environment(knobs)
    for name in AT_LEAST_ONE:
        value = as_int(knobs, name)
        if value is None or value < 1:
            problems += err(name, f"must be at least 1, got {knobs.get(name)!r}")
    subset = as_str(knobs, "backup_check_read_data_subset")
    if _subset_problem(subset):
        problems += err(
            "backup_check_read_data_subset",
            f"{subset!r} is not restic's --read-data-subset (such as 5%, 1/7, 500M; '' = the structure only)",
        )
    url = as_str(knobs, "backup_heartbeat_url")
    if url and (_url_problem(url, "it") or not url.isprintable() or _SPACE.search(url)):
        problems += err(
            "backup_heartbeat_url", "is not an http(s) URL with a host (value not shown: it may carry a token)"
        )
    for name in CALENDAR_KNOBS:
        if problem := calendar_problem(knobs, host, name):
            problems += err(name, problem)
    return problems
