"""Managed by llmrig: what both sides of llmrig-backup share (installed beside it, imported by it):
its configuration, the restic call, and SQLite's integrity check. Standard library only."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any


class Failure(Exception):
    """A step failed; the message is the journal line."""


def say(text: str) -> None:
    print(text, flush=True)


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            config: dict[str, Any] = json.load(handle)
    except (OSError, ValueError) as exc:
        raise Failure(f"cannot read the configuration {path}: {exc}") from exc
    return config


def restic_env(config: dict[str, Any]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RESTIC_", "AWS_"))}
    env["RESTIC_REPOSITORY"] = config["repository"]
    env["RESTIC_PASSWORD_FILE"] = config["password_file"]
    env["RESTIC_CACHE_DIR"] = config["cache_dir"]
    try:
        with open(config["environment_file"], encoding="utf-8") as handle:
            env.update({str(key): str(value) for key, value in json.load(handle).items()})
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise Failure(f"cannot read the backend's environment file {config['environment_file']}: {exc}") from exc
    return env


def restic(config: dict[str, Any], *args: str, what: str, env: dict[str, str] | None = None) -> str:
    """restic's standard output; a failure raises with restic's reason (its last "Fatal:" line,
    else its last error line: the lines after a "Fatal:" may only name the repository)."""
    # Listing takes no lock: restore.yml may read the snapshots while a backup runs.
    command = [config["restic"], *(["--no-lock"] if args[0] == "snapshots" else ["--quiet"]), *args]
    environment = {**restic_env(config), **(env or {})}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        lines = lines or [f"exit status {done.returncode}"]
        fatal = [line for line in lines if line.startswith("Fatal:")]
        raise Failure(f"{what} failed: {(fatal or lines)[-1]}")
    return done.stdout


def integrity(database: Path) -> None:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        result = connection.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.Error as exc:
        raise Failure(f"{database} is not a readable SQLite database: {exc}") from exc
    finally:
        connection.close()
    if result != [("ok",)]:
        raise Failure(f"{database} fails PRAGMA integrity_check: {result[:3]}")
