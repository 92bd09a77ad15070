"""Managed by llmrig: the restore side of llmrig-backup (installed beside it, imported by it): ``restore``
of a snapshot into an empty folder, ``newer`` (the live database's chats and files changed at or after a
snapshot's time) and ``put-back`` (a restored snapshot put in place, what it replaces moved aside).
Standard library only."""

from __future__ import annotations

import datetime
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from llmrig_backup_common import Failure, integrity, restic, say

# Tables of Open WebUI's database whose rows people make, with the column that says when.
USER_DATA = (("chat", "updated_at"), ("file", "updated_at"))


def restore(config: dict[str, Any], snapshot: str, target: Path) -> None:
    if target.exists() and any(target.iterdir()):
        raise Failure(f"the restore folder {target} is not empty")
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    restic(config, "restore", snapshot, "--target", str(target), what=f"restic restore {snapshot}")
    database = target / Path(config["staging_dir"]).relative_to("/") / "webui.db"
    if database.exists():  # a box with Open WebUI off backs up no database
        integrity(database)
    say(f"restored snapshot {snapshot} into {target}" + ("; its database passes integrity_check" * database.exists()))


def unix_time(restic_time: str) -> float:
    """restic's snapshot time (RFC 3339 with nanoseconds) in Unix seconds, the fraction dropped."""
    plain = re.sub(r"\.\d+", "", restic_time.strip()).replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(plain).timestamp()
    except ValueError as exc:
        raise Failure(f"{restic_time!r} is not a snapshot time") from exc


def newer(database: Path, since: float) -> dict[str, int]:
    """Rows of the live database changed at or after ``since`` (Unix seconds, whole), by table:
    Open WebUI keeps whole seconds, so a row of the snapshot's second counts (the safe side)."""
    if not database.exists():
        return {}
    counts: dict[str, int] = {}
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=60)
    try:
        for table, column in USER_DATA:
            try:
                (count,) = connection.execute(
                    f'SELECT count(*) FROM "{table}" WHERE "{column}" >= ?', (since,)
                ).fetchone()
            except sqlite3.OperationalError:  # a table this release does not have
                continue
            counts[table] = int(count)
    finally:
        connection.close()
    return counts


def _owner(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_uid, status.st_gid


def _chown_tree(root: Path, owner: tuple[int, int]) -> None:
    os.chown(root, *owner)
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            os.chown(os.path.join(folder, name), *owner, follow_symlinks=False)


def _install(source: Path, live: Path, owner: tuple[int, int], mode: int) -> None:
    """``source``'s content at ``live``, atomically, with ``owner`` and ``mode`` from its creation
    on (never readable by others on the way, as a copy made with the umask's mode would be)."""
    incoming = live.with_name(f".restoring-{live.name}")
    incoming.unlink(missing_ok=True)
    descriptor = os.open(incoming, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as target, open(source, "rb") as origin:
        shutil.copyfileobj(origin, target)
    os.chown(incoming, *owner)
    os.chmod(incoming, mode)
    os.replace(incoming, live)


def _aside(live: Path, replaced: Path) -> None:
    """Move ``live`` (if it is there) under ``replaced``, keeping its absolute path's shape."""
    if live.exists() or live.is_symlink():
        keep = replaced / live.relative_to("/")
        keep.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.move(str(live), str(keep))


def put_back(config: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Put a restored snapshot (``workdir``/snapshot, from ``restore``) in place while Open WebUI and
    Caddy are stopped: the database, the uploads, the secrets and Caddy's data, each with the owner
    of the folder it goes into (uids differ between boxes) and the live file's mode. What it
    replaces is moved under ``workdir``/replaced, never deleted."""
    snapshot, replaced = workdir / "snapshot", workdir / "replaced"
    replaced.mkdir(mode=0o700, parents=True, exist_ok=True)
    inside = lambda path: snapshot / Path(path).relative_to("/")  # noqa: E731
    data_dir = Path(config["uploads"]).parent  # Open WebUI's data folder
    done: dict[str, Any] = {"database": "", "secrets": [], "folders": [], "counts": {}}
    restored = inside(config["staging_dir"]) / "webui.db"
    if config["database"] and restored.is_file():
        database = Path(config["database"])
        mode = database.stat().st_mode & 0o777 if database.exists() else 0o600
        for suffix in ("", "-wal", "-shm", "-journal"):
            _aside(database.with_name(database.name + suffix), replaced)
        _install(restored, database, _owner(database.parent), mode)
        done["database"], done["counts"] = str(database), counts(database)
    for folder, owner_of in ((config["uploads"], data_dir), (config["caddy_data"], Path(config["caddy_data"]).parent)):
        source, live = inside(folder), Path(folder)
        if source.is_dir() and owner_of.is_dir():
            _aside(live, replaced)
            shutil.copytree(source, live, symlinks=True)
            _chown_tree(live, _owner(owner_of))
            done["folders"].append(folder)
    secrets = Path(config["secrets_dir"])
    for name in config["secrets"]:
        source, live = inside(str(secrets)) / name, secrets / name
        if source.is_file():
            if live.exists():
                keep = replaced / live.relative_to("/")
                keep.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                shutil.copy2(live, keep)
            _install(source, live, _owner(secrets), 0o600)
            done["secrets"].append(name)
    done["replaced"] = str(replaced)
    return done


def counts(database: Path) -> dict[str, int]:
    """Users, chats and files in a database."""
    found: dict[str, int] = {}
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        for table in ("user", "chat", "file"):
            try:
                found[table] = int(connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
            except sqlite3.OperationalError:
                continue
    finally:
        connection.close()
    return found
