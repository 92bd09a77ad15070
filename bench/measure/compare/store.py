"""The result store: ``RESULTS_DIR/<tag>/*.json``, one file per ``bench run``, read back by tag.

A tag names one deployed configuration; :func:`configuration` flattens what the runs recorded of
it (deployment.json, the server's cache config, the versions) into ``key: value`` facts, so that
``bench tags`` and ``bench compare`` can say which of them differ between two tags.
Sub-folders of a tag (``probes/``, ``capacity/``) hold other kinds of file and are not read here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.codec import JsonValue
from bench.errors import ConfigError, ResultFileError
from bench.measure.run import results
from bench.measure.run.results import RunResult
from bench.rig import parse_flags

# Facts that change with every restart or every run, not with the configuration.
VOLATILE = ("startup.invocation_id", "startup.active_since")
# What an engine measured about itself while it started (load and capture times, memory, the KV
# pool it could allocate) and the time from its unit's start to its first answer (startup.ready_s,
# bench.rig.ready, or why it was not measured): outcomes of a configuration, never a cause.
OUTCOMES = (
    "startup.ready_reason",
    "startup.kv_cache_tokens",
    "startup.max_concurrency",
    "server.cache_config.num_gpu_blocks",
    "server.cache_config.num_cpu_blocks",
)
OUTCOME_UNITS = ("_seconds", "_secs", "_s", "_ms", "_gib", "_mib", "_bytes")


def is_outcome(key: str) -> bool:
    """Whether a recorded fact is something the engine measured (a time, a size) rather than set."""
    return key in OUTCOMES or (key.startswith("startup.") and key.endswith(OUTCOME_UNITS))


@dataclass(frozen=True, slots=True)
class StoredRun:
    """One result file and what it holds."""

    path: Path
    result: RunResult

    @property
    def preset(self) -> str | None:
        """The deployed preset the run measured (deployment.json), if bench knew it."""
        record = self.result.environment.deployment_record
        return record.preset if record else None

    @property
    def group(self) -> str:
        """What served the run behind a gateway (its boxes, in one line); '' for one box."""
        record = self.result.environment.deployment_record
        return record.gateway.describe() if record and record.gateway else ""


@dataclass(frozen=True, slots=True)
class TagInfo:
    """One tag: its runs, when they ran, what served them, and its configuration facts."""

    tag: str
    runs: int
    untrusted: int
    first: str  # started_at of the first run (ISO 8601, UTC)
    last: str
    workloads: dict[str, int]
    engine: str
    preset: str | None
    model: str | None
    config: dict[str, str]


def tags(results_dir: Path) -> list[str]:
    """The tags that have at least one result file, by name."""
    if not results_dir.is_dir():
        return []
    return sorted(entry.name for entry in results_dir.iterdir() if entry.is_dir() and any(entry.glob("*.json")))


def readable(results_dir: Path) -> tuple[dict[str, list[StoredRun]], list[str]]:
    """Every tag's runs, and each folder left out because a file in it is not a result file
    (a folder of other JSON beside the tags), with why."""
    found: dict[str, list[StoredRun]] = {}
    skipped: list[str] = []
    for tag in tags(results_dir):
        try:
            found[tag] = runs(results_dir, tag)
        except ResultFileError as exc:
            skipped.append(f"{tag}: {exc}")
    return found, skipped


def runs(results_dir: Path, tag: str) -> list[StoredRun]:
    """Every run filed under ``tag``, oldest first; a tag without files is a ConfigError that
    lists the tags there are."""
    folder = results_dir / tag
    files = sorted(path for path in folder.glob("*.json") if not path.name.startswith("."))
    if not files:
        known = ", ".join(tags(results_dir)) or "none"
        raise ConfigError(f"tag {tag!r}: no result files under {folder} (tags in {results_dir}: {known})")
    stored = [StoredRun(path, results.RESULT_FILE.read(path)) for path in files]
    return sorted(stored, key=lambda run: (run.result.started_at, run.path.name))


def flags(args: list[str]) -> dict[str, str]:
    """A command line's flags and their values (bench.rig.parse_flags), a switch shown as "on"."""
    return {name: "on" if value is None else value for name, value in parse_flags(args).items()}


def _flatten(prefix: str, value: JsonValue, into: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, inner, into)
    elif isinstance(value, list) and prefix.endswith(".args") and all(isinstance(arg, str) for arg in value):
        for name, flag_value in flags([str(arg) for arg in value]).items():
            into[f"{prefix} {name}"] = flag_value
    elif isinstance(value, list):
        into[prefix] = ", ".join(str(item) for item in value)
    elif value is not None:
        into[prefix] = str(value)


def configuration(run: RunResult) -> dict[str, str]:
    """The configuration facts one run recorded, flattened: deployment.json (the vLLM command
    line as its flags), the served context, the server's cache config, bench's version."""
    facts: dict[str, str] = {}
    _flatten("", run.environment.deployment or {}, facts)
    for key in VOLATILE:
        facts.pop(key, None)
    facts["engine"] = run.environment.engine
    facts["bench_version"] = run.environment.bench_version
    if run.environment.max_model_len is not None:
        facts["served.max_model_len"] = str(run.environment.max_model_len)
    for level in run.levels[:1]:
        for key, value in level.server.cache_config.items():
            facts[f"server.cache_config.{key}"] = value
    return facts


def tag_configuration(stored: list[StoredRun]) -> dict[str, str]:
    """A tag's facts over all its runs; a fact its runs disagree on is shown as "a | b", oldest
    value first (a tag's runs should all have measured one configuration)."""
    seen: dict[str, list[str]] = {}
    for run in stored:
        for key, value in configuration(run.result).items():
            values = seen.setdefault(key, [])
            if value not in values:
                values.append(value)
    return {key: " | ".join(values) for key, values in sorted(seen.items())}


def differences(a: dict[str, str], b: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """The facts that differ between two configurations: key to (value in a, value in b); None
    where one side does not have the fact."""
    keys = sorted(set(a) | set(b))
    return {key: (a.get(key), b.get(key)) for key in keys if a.get(key) != b.get(key)}


def tag_info(tag: str, stored: list[StoredRun]) -> TagInfo:
    """The summary of one tag that ``bench tags`` prints."""
    newest = stored[-1].result
    return TagInfo(
        tag=tag,
        runs=len(stored),
        untrusted=sum(1 for run in stored if not run.result.trusted),
        first=stored[0].result.started_at,
        last=newest.started_at,
        workloads=dict(Counter(run.result.workload for run in stored)),
        engine=newest.environment.engine,
        preset=stored[-1].preset,
        model=newest.environment.model,
        config=tag_configuration(stored),
    )
