"""Probes for llmrig's preflight, shared by its Ansible modules: what a path is on this host,
whether it can bind an address, and who listens on which TCP port (from /proc/net/tcp and tcp6,
with the holder's systemd unit when the caller may see it; root sees every process)."""

from __future__ import annotations

import os
import socket
import struct

LISTEN = "0A"


def _kind(path):
    if os.path.isdir(path):
        return "dir"
    if os.path.isfile(path):
        return "file"
    return "other" if os.path.lexists(path) else "missing"


def probe_path(path):
    """What ``path`` is on this host; relative paths are reported as such and not resolved."""
    absolute = os.path.isabs(path)
    kind = _kind(path) if absolute else "missing"
    parent = path if absolute else ""
    while parent and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    return {
        "path": path,
        "absolute": absolute,
        "kind": kind,
        "executable": kind == "file" and os.access(path, os.X_OK),
        "parent": parent,
        "parent_kind": _kind(parent) if parent else "missing",
        "parent_writable": bool(parent) and os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK),
    }


def probe_address(address):
    """Whether this host can bind ``address`` (as a service bound to it would): ``bindable``, and
    the system's reason when it cannot (an address no interface of the host has)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((address, 0))
    except OSError as exc:
        return {"address": address, "bindable": False, "error": exc.strerror or str(exc)}
    return {"address": address, "bindable": True, "error": ""}


def _address(hex_address):
    """An address of /proc/net/tcp (little-endian 32-bit words) as text."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(struct.pack("<I", word) for word in struct.unpack(f">{len(raw) // 4}I", raw))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words)


def parse_proc_net_tcp(text):
    """(address, port, inode) of each listening socket in a /proc/net/tcp or tcp6 table."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        address, _, port = fields[1].partition(":")
        found.append((_address(address), int(port, 16), fields[9]))
    return found


def unit_of(cgroup_text):
    """The systemd unit in a /proc/PID/cgroup text ('' when the process is in none)."""
    for line in cgroup_text.splitlines():
        path = line.rpartition(":")[2]
        for part in reversed(path.split("/")):
            if part.endswith((".service", ".scope")):
                return part
    return ""


def read_text(path):
    """The text of ``path``, '' when it cannot be read (a /proc entry that vanished, say)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _socket_owners():
    """Socket inode to pid, for every process whose descriptors this user may read."""
    owners = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            except OSError:
                continue
            if target.startswith("socket:["):
                owners.setdefault(target[8:-1], int(pid))
    return owners


def listeners():
    owners = _socket_owners()
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for address, port, inode in parse_proc_net_tcp(read_text(table)):
            pid = owners.get(inode, 0)
            found.append(
                {
                    "address": address,
                    "port": port,
                    "pid": pid,
                    "process": read_text(f"/proc/{pid}/comm").strip() if pid else "",
                    "unit": unit_of(read_text(f"/proc/{pid}/cgroup")) if pid else "",
                }
            )
    return found
