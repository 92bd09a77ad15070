"""The backup role (roles/backup): its program, roles/backup/files/llmrig-backup (with its modules
beside it, llmrig_backup_common.py and llmrig_backup_restore.py), run as a separate process with a
configuration the test writes, against the real restic (Debian's package, which
scripts/testrig installs) and a local repository in the test's folder: a consistent copy of a
SQLite database that another process writes to, init and a wrong password, retention,
the textfile metrics, the heartbeat, the password off every command line, and restore, newer and
put-back. Then the role's units rendered by real Ansible, checked by the host's systemd-analyze
(verify, calendar, security), and the program as the role installs it, importing its modules from
its own folder."""

from __future__ import annotations

import datetime
import hashlib
import http.server
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import GROUP_VARS, REPO, LoopbackServer, render_units

pytestmark = pytest.mark.ansible

PROGRAM = REPO / "roles" / "backup" / "files" / "llmrig-backup"
HOST = "box-under-test"
PASSWORD = "Rp7-distinctive-backup-password-Qz4"
SECRETS = ["api_key", "hf_token", "open_webui_secret_key"]
# The exposure `systemd-analyze security --offline=true` gives the backup and check services today
# (systemd 252: 1.9, root with CAP_DAC_READ_SEARCH, CAP_DAC_OVERRIDE and the network): a change
# that raises it fails.
SECURITY_CEILING = 1.9


def _restic() -> str:
    found = shutil.which("restic") or ("/usr/bin/restic" if os.access("/usr/bin/restic", os.X_OK) else None)
    if found is None:
        pytest.fail(
            "restic is not installed: scripts/testrig restic installs Debian's package (apt-get install restic)"
        )
    return found


class Box:
    """A box's folders under ``root`` (Open WebUI's data, /etc/llmrig, Caddy's data, the
    program's own folders), a local repository beside them, and the program's 0600 configuration."""

    def __init__(self, root: Path, **overrides: Any) -> None:
        self.root = root
        self.data = root / "var/lib/open-webui"
        self.database = self.data / "webui.db"
        self.uploads = self.data / "uploads"
        self.secrets = root / "etc/llmrig"
        self.caddy = root / "var/lib/llmrig-proxy/data/caddy"
        self.staging = root / "var/backups/llmrig/staging"
        self.textfile = root / "textfile"
        self.repository = root / "repository"
        self.config_path = root / "etc/llmrig/backup/config.json"
        for folder in (self.data, self.uploads, self.secrets / "backup", self.caddy / "pki", self.textfile):
            folder.mkdir(parents=True, exist_ok=True)
        password = self.secrets / "backup" / "password"
        password.write_text(PASSWORD + "\n", encoding="utf-8")
        password.chmod(0o600)
        for name in SECRETS:
            (self.secrets / name).write_text(f"snapshot-{name}\n", encoding="utf-8")
            (self.secrets / name).chmod(0o600)
        (self.uploads / "report.pdf").write_bytes(b"uploaded by a user")
        (self.caddy / "pki" / "root.crt").write_text("snapshot-ca\n", encoding="utf-8")
        self.config: dict[str, Any] = {
            "repository": str(self.repository),
            "repository_label": str(self.repository),
            "password_file": str(password),
            "environment_file": str(self.secrets / "backup" / "environment.json"),
            "cache_dir": str(root / "cache"),
            "restic": _restic(),
            "host": HOST,
            "database": str(self.database),
            "staging_dir": str(self.staging),
            "paths": [str(self.uploads), str(self.secrets), str(self.caddy)],
            "uploads": str(self.uploads),
            "secrets_dir": str(self.secrets),
            "secrets": SECRETS,
            "caddy_data": str(self.caddy),
            "excludes": [str(self.secrets / "backup")],
            "keep": {"daily": 30, "weekly": 8, "monthly": 12},
            "read_data_subset": "",
            "heartbeat_url": "",
            "textfile_dir": str(self.textfile),
            "max_age_s": {"backup": 7200, "check": 1296000},
            **overrides,
        }
        self.write_config()

    def write_config(self) -> None:
        self.config_path.write_text(json.dumps(self.config), encoding="utf-8")
        self.config_path.chmod(0o600)

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """llmrig-backup ``args`` as a process of its own, as the units and restore.yml run it."""
        return subprocess.run(
            [sys.executable, str(PROGRAM), "--config", str(self.config_path), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def restic(self, *args: str) -> None:
        """The real restic on this box's repository, as the program's environment hands it over."""
        env = {
            **os.environ,
            "RESTIC_REPOSITORY": str(self.repository),
            "RESTIC_PASSWORD_FILE": self.config["password_file"],
        }
        env["RESTIC_CACHE_DIR"] = self.config["cache_dir"]
        done = subprocess.run([_restic(), "--quiet", *args], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr

    def snapshots(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads(self.ok("snapshots").stdout)
        return found

    def metrics(self, task: str = "backup") -> dict[str, float]:
        text = (self.textfile / f"llmrig-backup-{task}.prom").read_text(encoding="utf-8")
        found = {}
        for line in text.splitlines():
            if not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                assert name.endswith(f'{{task="{task}"}}'), line
                found[name.split("{")[0].removeprefix("llmrig_backup_")] = float(value)
        return found


def _open_webui_database(
    path: Path, chats: list[tuple[str, int]] | None = None, files: list[tuple[str, int]] | None = None
) -> None:
    """Open WebUI's tables that ``newer`` and ``put-back`` read, in WAL mode as Open WebUI keeps them."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute('CREATE TABLE IF NOT EXISTS "user" (id TEXT PRIMARY KEY)')
        connection.execute('CREATE TABLE IF NOT EXISTS "chat" (id TEXT PRIMARY KEY, updated_at INTEGER)')
        connection.execute('CREATE TABLE IF NOT EXISTS "file" (id TEXT PRIMARY KEY, updated_at INTEGER)')
        connection.execute('INSERT OR IGNORE INTO "user" VALUES (?)', ("admin",))
        connection.executemany('INSERT INTO "chat" VALUES (?, ?)', chats or [])
        connection.executemany('INSERT INTO "file" VALUES (?, ?)', files or [])
        connection.commit()
    finally:
        connection.close()


@pytest.fixture
def box(tmp_path: Path) -> Box:
    made = Box(tmp_path / "box")
    _open_webui_database(made.database, chats=[("chat-1", 1000)], files=[("file-1", 1000)])
    made.ok("init")
    return made


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its content's hash (what "untouched" compares)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _restic_time(text: str) -> float:
    plain = re.sub(r"\.\d+", "", text).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(plain).timestamp()


# 1. A consistent copy while another process writes.

WRITER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
connection.execute("PRAGMA journal_mode=WAL")
connection.execute("CREATE TABLE IF NOT EXISTS load (id INTEGER PRIMARY KEY, body TEXT)")
body = "x" * 2000
while True:
    connection.execute("BEGIN IMMEDIATE")
    row = connection.execute("INSERT INTO load (body) VALUES (?)", (body,)).lastrowid
    connection.execute("COMMIT")
    print(row, flush=True)
"""


def test_a_backup_taken_while_rows_are_written_restores_every_row_committed_before_it(box: Box, tmp_path: Path) -> None:
    """A writer commits one row at a time (WAL mode) while `run` backs up; the restored copy opens,
    passes integrity_check, is one file in rollback-journal mode, and holds every row committed
    before the backup started; the staging copy is gone after the run."""
    seed = sqlite3.connect(box.database)
    seed.execute("CREATE TABLE load (id INTEGER PRIMARY KEY, body TEXT)")
    seed.executemany("INSERT INTO load (body) VALUES (?)", [("y" * 2000,)] * 5000)  # about 10 MB to copy
    seed.commit()
    seed.close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(box.database)], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    committed: list[int] = []
    reader = threading.Thread(target=lambda: committed.extend(int(line) for line in writer.stdout), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while len(committed) < 200:  # the writer is well under way
            assert writer.poll() is None, "the writer ended"
            assert time.monotonic() < deadline, "the writer did not start writing"
            time.sleep(0.01)
        before = committed[-1]
        done = box.run("run")
        during = committed[-1]
    finally:
        writer.kill()
        writer.wait()
        reader.join(timeout=10)
        writer.stdout.close()  # type: ignore[union-attr]
    assert done.returncode == 0, done.stdout + done.stderr
    assert during > before, "the writer committed no row while the backup ran"
    assert list(box.staging.iterdir()) == [], "the staging copy was left behind"

    (snapshot,) = box.snapshots()
    target = tmp_path / "restored"
    box.ok("restore", snapshot["id"], str(target))
    folder = target / box.staging.relative_to("/")
    assert sorted(path.name for path in folder.iterdir()) == ["webui.db"]  # no -wal, no -shm beside it
    copy = folder / "webui.db"
    assert copy.read_bytes()[18:20] == b"\x01\x01"  # the file format bytes of rollback-journal mode, not WAL's 2
    connection = sqlite3.connect(copy)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        ids = {row for (row,) in connection.execute("SELECT id FROM load")}
    finally:
        connection.close()
    assert set(range(1, before + 1)) <= ids, f"rows committed before the backup are missing: {before} expected"
    assert max(ids) <= committed[-1], "the copy holds a row that was never committed"
    assert set(range(1, max(ids) + 1)) == ids, "the copy is not one point in time (a gap among the rows)"


def test_the_database_of_a_stopped_open_webui_on_a_read_only_file_system_is_backed_up(box: Box) -> None:
    """Under the unit's ProtectSystem=strict Open WebUI's folder is read-only; with Open WebUI stopped
    its WAL database has no -wal and -shm, which SQLite cannot create there: the copy still succeeds."""
    assert not Path(f"{box.database}-wal").exists()
    folder = shlex.quote(str(box.data))
    command = [
        "unshare", "--mount", "--", "sh", "-c",
        f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec \"$@\"", "read-only",
        sys.executable, str(PROGRAM), "--config", str(box.config_path), "run",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (snapshot,) = box.snapshots()
    assert snapshot["hostname"] == HOST


# 2. init.


def test_init_creates_the_repository_once_and_refuses_a_wrong_password(tmp_path: Path) -> None:
    made = Box(tmp_path / "box")
    first = made.ok("init")
    assert first.stdout.strip() == f"created the repository {made.repository}"
    assert (made.repository / "config").is_file()
    second = made.ok("init")
    assert second.stdout.strip() == f"the repository {made.repository} is there"

    before = _tree(made.repository)
    wrong = made.secrets / "backup" / "wrong"
    wrong.write_text("not-the-password\n", encoding="utf-8")
    made.config["password_file"] = str(wrong)
    made.write_config()
    refused = made.run("init")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"<3>llmrig-backup init: the repository {made.repository} exists, but backup_password does not open it"
    ]
    assert _tree(made.repository) == before


def test_init_never_makes_a_repository_whose_folder_is_missing(tmp_path: Path) -> None:
    """A local repository in a folder that does not exist (a NAS share not mounted): restic init
    would make every missing folder on the box's own disk; the program refuses instead."""
    made = Box(tmp_path / "box")
    made.config["repository"] = str(tmp_path / "not-mounted" / "llmrig")
    made.write_config()
    refused = made.run("init")
    assert refused.returncode == 1
    missing = tmp_path / "not-mounted"
    assert refused.stderr.splitlines() == [
        f"<3>llmrig-backup init: the repository's folder {missing} does not exist (is its disk mounted?)"
    ]
    assert not (tmp_path / "not-mounted").exists()


# 3. Retention.

WRAPPER = """#!{python}
# A wrapper in front of the real restic (not a fake): it logs its arguments, then runs restic with them.
import json, os, sys
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
os.execv({restic!r}, [{restic!r}, *sys.argv[1:]])
"""


def _wrap_restic(box: Box, tmp_path: Path) -> Path:
    log = tmp_path / "restic-argv.log"
    wrapper = tmp_path / "restic-wrapper"
    wrapper.write_text(WRAPPER.format(python=sys.executable, log=str(log), restic=_restic()), encoding="utf-8")
    wrapper.chmod(0o755)
    box.config["restic"] = str(wrapper)
    box.write_config()
    return log


def test_each_run_forgets_with_the_configured_retention_per_host(box: Box, tmp_path: Path) -> None:
    """After the backup, restic forget --prune gets exactly this host, the llmrig tag, one group per
    host and the keep counts of the configuration; the backup itself names the copy and the
    paths, leaves the program's own folder out and carries the time the copy began."""
    box.config["keep"] = {"daily": 3, "weekly": 2, "monthly": 4, "last": 5}
    log = _wrap_restic(box, tmp_path)
    box.ok("run")
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [call[1] for call in calls] == ["backup", "forget"]
    backup, forget = calls
    assert forget == [
        "--quiet", "forget", "--prune", "--host", HOST, "--tag", "llmrig", "--group-by", "host,tags",
        "--keep-daily", "3", "--keep-weekly", "2", "--keep-monthly", "4", "--keep-last", "5",
    ]  # fmt: skip
    # The machine id tags each snapshot (a rebuilt box under the same name has another one).
    machine = Path("/etc/machine-id").read_text(encoding="utf-8").strip()
    assert re.fullmatch(r"[0-9a-f]{32}", machine), "this machine has no systemd machine id"
    assert backup[:9] == [
        "--quiet",
        "backup",
        "--host",
        HOST,
        "--tag",
        "llmrig",
        "--tag",
        f"machine-{machine}",
        "--time",
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", backup[9])
    assert backup[10:] == [
        "--exclude", str(box.secrets / "backup"),
        str(box.staging / "webui.db"), str(box.uploads), str(box.secrets), str(box.caddy),
    ]  # fmt: skip


def test_retention_keeps_the_newest_snapshot_and_prune_frees_the_rest(box: Box) -> None:
    """With one daily, weekly and monthly snapshot kept, restic's policy keeps only the newest,
    whatever the date: after each run exactly the new snapshot is left, also when the set of paths
    changed between runs (Caddy's data appearing), and the data only an old snapshot held is pruned."""
    box.config["keep"] = {"daily": 1, "weekly": 1, "monthly": 1}
    box.write_config()
    shutil.rmtree(box.caddy)
    (box.uploads / "large.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    box.ok("run")
    (first,) = box.snapshots()
    assert str(box.caddy) not in first["paths"]
    data_size = sum(path.stat().st_size for path in (box.repository / "data").rglob("*") if path.is_file())
    assert data_size > 4 * 1024 * 1024

    (box.uploads / "large.bin").unlink()
    (box.caddy / "pki").mkdir(parents=True)
    (box.caddy / "pki" / "root.crt").write_text("ca\n", encoding="utf-8")
    seen = {first["id"]}
    for _ in range(2):
        box.ok("run")
        (newest,) = box.snapshots()
        assert newest["id"] not in seen
        assert str(box.caddy) in newest["paths"]
        seen.add(newest["id"])
    data_size = sum(path.stat().st_size for path in (box.repository / "data").rglob("*") if path.is_file())
    assert data_size < 1024 * 1024, "forget --prune left the large file's data in the repository"


# 4. Metrics, and 5. the heartbeat.


class Heartbeat(LoopbackServer):
    """A loopback HTTP server that records each request's path."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        heartbeat = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                heartbeat.paths.append(self.path)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


@pytest.fixture
def heartbeat() -> Iterator[Heartbeat]:
    server = Heartbeat()
    yield server
    server.close()


def _break_repository(box: Box) -> None:
    box.config["repository"] = box.config["repository_label"] = str(box.root / "no-repository-here")
    box.write_config()


def test_the_newest_snapshots_are_kept_whatever_their_day(box: Box) -> None:
    """With the role's keep-last, three backups on one day leave all three (the backup update.yml
    takes before an upgrade is not pushed out by the next one that day); without it, one."""
    box.config["keep"] = {"daily": 1, "weekly": 1, "monthly": 1, "last": 3}
    box.write_config()
    for _ in range(3):
        box.ok("run")
    assert len(box.snapshots()) == 3
    box.config["keep"] = {"daily": 1, "weekly": 1, "monthly": 1}
    box.write_config()
    box.ok("run")
    assert len(box.snapshots()) == 1


def test_the_metrics_say_success_then_failure_keeping_the_last_success(box: Box) -> None:
    box.ok("run")
    success = box.metrics()
    assert success["last_run_success"] == 1
    assert success["max_age_seconds"] == 7200
    assert success["last_success_timestamp_seconds"] == success["last_run_timestamp_seconds"] > 0
    assert (box.textfile / "llmrig-backup-backup.prom").stat().st_mode & 0o777 == 0o644
    assert sorted(path.name for path in box.textfile.iterdir()) == ["llmrig-backup-backup.prom"]

    _break_repository(box)
    failed = box.run("run")
    assert failed.returncode == 1
    (line,) = failed.stderr.splitlines()
    assert line.startswith("<3>llmrig-backup run: restic backup failed: Fatal: unable to open config file"), line
    failure = box.metrics()
    assert failure["last_run_success"] == 0
    assert failure["last_success_timestamp_seconds"] == success["last_success_timestamp_seconds"]
    assert failure["max_age_seconds"] == 7200
    assert list(box.staging.iterdir()) == []


def test_a_failure_outside_restic_is_a_journal_line_and_a_failed_metric(box: Box) -> None:
    """A step that fails with an OS error (here the staging folder is a file) still ends in one
    journal line and success 0, not a traceback without a metric."""
    box.staging.parent.mkdir(parents=True, exist_ok=True)
    box.staging.write_text("in the way\n", encoding="utf-8")
    failed = box.run("run")
    assert failed.returncode == 1
    (line,) = failed.stderr.splitlines()
    assert line.startswith("<3>llmrig-backup run: FileExistsError: "), line
    assert box.metrics()["last_run_success"] == 0


def test_the_check_writes_its_own_metric(box: Box) -> None:
    done = box.ok("check")
    assert done.stdout.strip() == f"restic check of {box.repository}: no errors"
    check = box.metrics("check")
    assert check["last_run_success"] == 1
    assert check["max_age_seconds"] == 1296000


def test_no_metric_is_written_without_the_textfile_folder(box: Box) -> None:
    shutil.rmtree(box.textfile)
    box.ok("run")
    _break_repository(box)
    assert box.run("run").returncode == 1
    assert not box.textfile.exists()


def test_the_heartbeat_is_requested_once_after_a_success_and_never_after_a_failure(
    box: Box, heartbeat: Heartbeat
) -> None:
    box.config["heartbeat_url"] = f"{heartbeat.url}/ping/Tk9-heartbeat-token"
    box.write_config()
    done = box.ok("run")
    assert heartbeat.paths == ["/ping/Tk9-heartbeat-token"]
    assert "heartbeat sent (HTTP 200)" in done.stdout
    assert "Tk9-heartbeat-token" not in done.stdout + done.stderr

    _break_repository(box)
    assert box.run("run").returncode == 1
    assert heartbeat.paths == ["/ping/Tk9-heartbeat-token"]


# 6. The password.


def _command_lines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:  # the process ended
                continue
    return lines


def test_the_password_is_on_no_command_line_and_in_no_output(box: Box, tmp_path: Path) -> None:
    """Every command line on the machine, sampled while each subcommand runs restic, and every
    output of the program: the repository's password appears in none."""
    (box.uploads / "large.bin").write_bytes(os.urandom(16 * 1024 * 1024))  # restic runs a while
    restic_lines: set[str] = set()
    leaks: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for line in _command_lines():
                if PASSWORD in line:
                    leaks.append(line)
                if line.startswith(_restic()):
                    restic_lines.add(line)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    outputs = []
    try:
        for args in (["init"], ["run"], ["check"], ["snapshots"]):
            outputs.append(box.ok(*args))
        snapshot = box.snapshots()[-1]["id"]
        outputs.append(box.ok("restore", snapshot, str(tmp_path / "restored")))
        outputs.append(box.ok("newer", box.snapshots()[-1]["time"]))
        _break_repository(box)
        outputs.append(box.run("run"))
    finally:
        stop.set()
        sampler.join(timeout=10)
    assert leaks == []
    assert any(" backup " in line for line in restic_lines), "the sampler never saw restic back up"
    for done in outputs:
        assert PASSWORD not in done.stdout + done.stderr


# 7. snapshots, newer, restore and put-back.


def test_snapshots_lists_this_hosts_llmrig_snapshots_oldest_first(box: Box) -> None:
    """Beside a run's snapshot: an older one of this host, one of another host and one without the
    llmrig tag (restic backup run by hand); the listing holds this host's two, oldest first."""
    box.ok("run")
    box.restic("backup", "--host", HOST, "--tag", "llmrig", "--time", "2020-01-02 03:04:05", str(box.uploads))
    box.restic("backup", "--host", "another-box", "--tag", "llmrig", str(box.uploads))
    box.restic("backup", "--host", HOST, str(box.uploads))
    listed = box.snapshots()
    assert [snapshot["hostname"] for snapshot in listed] == [HOST, HOST]
    assert listed[0]["time"].startswith("2020-01-02T03:04:05")
    assert listed[1]["paths"] == sorted(
        [str(box.staging / "webui.db"), str(box.uploads), str(box.secrets), str(box.caddy)]
    )
    assert all("llmrig" in snapshot["tags"] for snapshot in listed)
    # The program's own run carries this machine's id, which snapshots marks as this box's.
    assert [snapshot["this_box"] for snapshot in listed] == [False, True]
    (other,) = json.loads(box.ok("snapshots", "--host", "another-box").stdout)
    assert other["paths"] == [str(box.uploads)]


def test_newer_counts_the_chats_and_files_changed_at_or_after_a_snapshot(box: Box) -> None:
    box.ok("run")
    (snapshot,) = box.snapshots()
    taken = int(_restic_time(snapshot["time"]))
    assert json.loads(box.ok("newer", snapshot["time"]).stdout) == {"chat": 0, "file": 0}
    _open_webui_database(
        box.database,
        chats=[("old", taken - 100), ("same-second", taken), ("later", taken + 100)],
        files=[("older", taken - 1), ("newer", taken + 50)],
    )
    assert json.loads(box.ok("newer", snapshot["time"]).stdout) == {"chat": 2, "file": 1}


SAVE_DURING_BACKUP = """#!{python}
# A wrapper in front of the real restic: before `restic backup` starts, Open WebUI saves a chat
# (after the program copied the database), a second passes, then the real restic runs.
import os, sqlite3, sys, time
if "backup" in sys.argv[1:3]:
    connection = sqlite3.connect({database!r})
    connection.execute('INSERT INTO "chat" VALUES (?, ?)', ("saved-while-restic-ran", int(time.time())))
    connection.commit()
    connection.close()
    time.sleep(1.2)
os.execv({restic!r}, [{restic!r}, *sys.argv[1:]])
"""


def test_newer_counts_a_chat_saved_after_the_copy_while_restic_ran(box: Box, tmp_path: Path) -> None:
    """The snapshot's time is when the database copy began: a chat saved after the copy (so not in
    the snapshot), before restic started, counts as newer."""
    wrapper = tmp_path / "restic-wrapper"
    text = SAVE_DURING_BACKUP.format(python=sys.executable, database=str(box.database), restic=_restic())
    wrapper.write_text(text, encoding="utf-8")
    wrapper.chmod(0o755)
    box.config["restic"] = str(wrapper)
    box.write_config()
    box.ok("run")
    (snapshot,) = box.snapshots()
    assert json.loads(box.ok("newer", snapshot["time"]).stdout) == {"chat": 1, "file": 0}


def _move_on(box: Box) -> None:
    """The live box after the snapshot: other content, and folders owned by the services' users."""
    box.database.unlink()
    _open_webui_database(box.database, chats=[("live-1", 5), ("live-2", 6)])
    Path(f"{box.database}-wal").write_bytes(b"live wal")
    box.database.chmod(0o640)
    shutil.rmtree(box.uploads)
    box.uploads.mkdir()
    (box.uploads / "live.txt").write_text("live upload\n", encoding="utf-8")
    for name in SECRETS[:2]:
        (box.secrets / name).write_text(f"live-{name}\n", encoding="utf-8")
    (box.secrets / "unlisted").write_text("stays\n", encoding="utf-8")
    shutil.rmtree(box.caddy)
    (box.caddy / "pki").mkdir(parents=True)
    (box.caddy / "pki" / "root.crt").write_text("live-ca\n", encoding="utf-8")
    os.chown(box.data, 1234, 1234)
    os.chown(box.caddy.parent, 1235, 1235)
    os.chown(box.secrets, 1236, 1236)
    (box.secrets / SECRETS[2]).unlink()  # a secret the live box lacks


def test_put_back_puts_the_snapshot_in_place_with_each_folders_owner_and_keeps_what_it_replaced(
    box: Box, tmp_path: Path
) -> None:
    """After `restore`, `put-back` puts the database, the uploads, the named secrets and Caddy's data
    in place, each owned as the folder it goes into (uids 1234, 1235, 1236 here), secrets 0600, the
    database with the live one's mode; what they replace is moved under WORKDIR/replaced, none deleted."""
    box.ok("run")
    (snapshot,) = box.snapshots()
    workdir = tmp_path / "restore" / snapshot["short_id"]
    box.ok("restore", snapshot["id"], str(workdir / "snapshot"))

    _move_on(box)
    done = box.ok("put-back", str(workdir))
    report = json.loads(done.stdout)
    replaced = workdir / "replaced"
    assert report == {
        "database": str(box.database),
        "secrets": SECRETS,
        "folders": [str(box.uploads), str(box.caddy)],
        "counts": {"user": 1, "chat": 1, "file": 1},
        "replaced": str(replaced),
    }
    # The snapshot's content, owned as each folder is.
    status = box.database.stat()
    assert (status.st_uid, status.st_gid, status.st_mode & 0o777) == (1234, 1234, 0o640)
    assert not Path(f"{box.database}-wal").exists()
    assert sorted(path.name for path in box.uploads.iterdir()) == ["report.pdf"]
    assert {(path.stat().st_uid, path.stat().st_gid) for path in [box.uploads, *box.uploads.rglob("*")]} == {
        (1234, 1234)
    }
    assert (box.caddy / "pki" / "root.crt").read_text(encoding="utf-8") == "snapshot-ca\n"
    assert {(path.stat().st_uid, path.stat().st_gid) for path in [box.caddy, *box.caddy.rglob("*")]} == {(1235, 1235)}
    for name in SECRETS:
        path = box.secrets / name
        assert path.read_text(encoding="utf-8") == f"snapshot-{name}\n"
        assert (path.stat().st_uid, path.stat().st_gid, path.stat().st_mode & 0o777) == (1236, 1236, 0o600)
    assert (box.secrets / "unlisted").read_text(encoding="utf-8") == "stays\n"
    assert not list(box.secrets.glob(".restoring-*"))
    assert not list(box.data.glob(".restoring-*"))
    # What was replaced, kept.
    aside = lambda path: replaced / path.relative_to("/")  # noqa: E731
    assert Path(f"{aside(box.database)}-wal").read_bytes() == b"live wal"
    Path(f"{aside(box.database)}-wal").unlink()  # not a WAL file SQLite could read
    kept = sqlite3.connect(aside(box.database))
    try:
        assert kept.execute('SELECT count(*) FROM "chat"').fetchone() == (2,)
    finally:
        kept.close()
    assert (aside(box.uploads) / "live.txt").read_text(encoding="utf-8") == "live upload\n"
    assert (aside(box.caddy) / "pki" / "root.crt").read_text(encoding="utf-8") == "live-ca\n"
    for name in SECRETS[:2]:
        assert (aside(box.secrets) / name).read_text(encoding="utf-8") == f"live-{name}\n"
    assert not (aside(box.secrets) / SECRETS[2]).exists()


def test_restore_refuses_a_folder_that_is_not_empty(box: Box, tmp_path: Path) -> None:
    box.ok("run")
    (snapshot,) = box.snapshots()
    target = tmp_path / "busy"
    target.mkdir()
    (target / "something").write_text("here\n", encoding="utf-8")
    refused = box.run("restore", snapshot["id"], str(target))
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [f"<3>llmrig-backup restore: the restore folder {target} is not empty"]
    assert sorted(path.name for path in target.iterdir()) == ["something"]


# 8. The units.

UNITS = ("llmrig-backup.service", "llmrig-backup.timer", "llmrig-backup-check.service", "llmrig-backup-check.timer")
UNIT_SECRETS = {
    "backup_password": "Up3-unit-password-never-in-a-unit",
    "backup_environment": {"AWS_SECRET_ACCESS_KEY": "Aw5-secret-never-in-a-unit"},
    "backup_heartbeat_url": "https://hc-ping.example/Hb7-token-never-in-a-unit",
}
REPOSITORIES = {"local": "/srv/restic/llmrig", "remote": "rest:https://backup:Rs2-url-password@nas.example:8000/llmrig"}


@pytest.fixture(scope="module")
def units(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The four units rendered by real Ansible with group_vars, for a local and a remote repository."""
    variants = {kind: {"backup_repository": repository, **UNIT_SECRETS} for kind, repository in REPOSITORIES.items()}
    folders = render_units("tests/ansible/render_backup_units.yml", variants, tmp_path_factory)
    for folder in folders.values():
        assert sorted(path.name for path in folder.iterdir()) == sorted(UNITS)
    return folders


def _settings(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("kind", sorted(REPOSITORIES))
def test_the_units_pass_systemd_analyze_verify_and_hold_no_secret(units: dict[str, Path], kind: str) -> None:
    paths = [str(units[kind] / name) for name in UNITS]
    done = subprocess.run(
        ["systemd-analyze", "verify", *paths], capture_output=True, text=True, check=False, timeout=120
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    text = "".join((units[kind] / name).read_text(encoding="utf-8") for name in UNITS)
    for secret in ["Rs2-url-password", UNIT_SECRETS["backup_password"], "Aw5-secret", "Hb7-token"]:
        assert secret not in text


def test_a_local_repository_is_writable_and_a_remote_one_adds_no_path(units: dict[str, Path]) -> None:
    for service in ("llmrig-backup.service", "llmrig-backup-check.service"):
        local = [line for line in _settings(units["local"] / service) if line.startswith("ReadWritePaths=")]
        assert local == [
            "ReadWritePaths=/var/backups/llmrig /var/cache/llmrig-backup -/var/lib/prometheus/node-exporter"
            " -/var/lib/open-webui -/srv/restic/llmrig"
        ]
        remote = [line for line in _settings(units["remote"] / service) if line.startswith("ReadWritePaths=")]
        assert remote == [
            "ReadWritePaths=/var/backups/llmrig /var/cache/llmrig-backup -/var/lib/prometheus/node-exporter"
            " -/var/lib/open-webui"
        ]
        assert "ProtectSystem=strict" in _settings(units["local"] / service)
    assert "rest:https://***@nas.example:8000/llmrig" in (units["remote"] / "llmrig-backup.service").read_text(
        encoding="utf-8"
    )


def test_the_default_schedules_are_valid_calendar_expressions(units: dict[str, Path]) -> None:
    defaults = yaml.safe_load((GROUP_VARS / "backup.yml").read_text(encoding="utf-8"))
    for timer, knob, shown in (
        ("llmrig-backup.timer", "backup_schedule", "*-*-* 03:30:00"),
        ("llmrig-backup-check.timer", "backup_check_schedule", "Sun *-*-* 05:00:00"),
    ):
        assert f"OnCalendar={defaults[knob]}" in _settings(units["local"] / timer)
        done = subprocess.run(
            ["systemd-analyze", "calendar", defaults[knob]], capture_output=True, text=True, check=False, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.search(rf"Normalized form: {re.escape(shown)}$", done.stdout, re.MULTILINE), done.stdout
        assert "Next elapse:" in done.stdout


def test_the_backup_service_scores_at_or_below_its_ceiling(units: dict[str, Path]) -> None:
    for service in ("llmrig-backup.service", "llmrig-backup-check.service"):
        done = subprocess.run(
            ["systemd-analyze", "security", "--offline=true", "--no-pager", str(units["local"] / service)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", done.stdout)
        assert found, done.stdout[-500:] + done.stderr[-500:]
        assert float(found.group(1)) <= SECURITY_CEILING, (service, found.group(1))


# 9. The program as the role installs it, with its modules beside it.

MODULES = yaml.safe_load((REPO / "roles" / "backup" / "vars" / "main.yml").read_text(encoding="utf-8"))[
    "_backup_modules"
]


def test_the_role_installs_every_module_of_the_program() -> None:
    """The role's files are the program and the modules _backup_modules installs beside it: a module
    left out of that list would be missing on the box."""
    found = sorted(path.name for path in PROGRAM.parent.iterdir() if path.name != "__pycache__")
    assert found == sorted([PROGRAM.name, *MODULES])


def test_the_installed_program_imports_its_modules_from_its_own_folder(tmp_path: Path) -> None:
    """Copied as the role installs it (one folder, the program 0755, its modules 0644) and run through
    a link in another folder, from a third current folder, by python3 -I (no script folder on the
    path, no PYTHON* variables): ``newer`` reads the live database through both modules, and no
    __pycache__ appears in the program's folder."""
    made = Box(tmp_path / "box")
    _open_webui_database(made.database, chats=[("chat-1", 1000)], files=[("file-1", 2000)])
    libexec = tmp_path / "libexec" / "llmrig"
    libexec.mkdir(parents=True)
    for name in (PROGRAM.name, *MODULES):
        shutil.copy(PROGRAM.parent / name, libexec / name)
        (libexec / name).chmod(0o755 if name == PROGRAM.name else 0o644)
    link = tmp_path / "bin" / PROGRAM.name
    link.parent.mkdir()
    link.symlink_to(libexec / PROGRAM.name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-I", str(link), "--config", str(made.config_path), "newer", "1970-01-01T00:25:00Z"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    assert json.loads(done.stdout) == {"chat": 0, "file": 1}
    assert sorted(path.name for path in libexec.iterdir()) == sorted([PROGRAM.name, *MODULES])
