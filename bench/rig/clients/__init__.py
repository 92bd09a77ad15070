"""Configurations for the agents people point at the server: OpenCode, Aider, Continue, Hermes
Agent and the OpenAI SDKs, written from deployment.json (:mod:`~bench.rig.clients.target`,
:mod:`~bench.rig.clients.writers`), into a folder that keeps people's edits
(:mod:`~bench.rig.clients.files`), and checked against the server as deployed now
(:mod:`~bench.rig.clients.drift`)."""

from bench.rig.clients.drift import Stale, stale_fields
from bench.rig.clients.files import MANIFEST, write_files
from bench.rig.clients.target import KEY_ENV, ClientTarget, PresetCapabilities, client_target, max_output
from bench.rig.clients.writers import CLIENT_NAMES, HERMES_MIN_CONTEXT, WRITERS, hermes_compaction_at

__all__ = [
    "CLIENT_NAMES",
    "HERMES_MIN_CONTEXT",
    "KEY_ENV",
    "MANIFEST",
    "WRITERS",
    "ClientTarget",
    "PresetCapabilities",
    "Stale",
    "client_target",
    "hermes_compaction_at",
    "max_output",
    "stale_fields",
    "write_files",
]
