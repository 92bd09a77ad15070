"""The target flags that every measuring command shares (``--base-url``, ``--api-key``,
``--model``, ``--tag``, ``--deployment``, ``--results-dir``) and their resolution, exactly as
``bench run`` resolves them (:mod:`bench.measure.target`).

Which deployment.json bench reads (:func:`discover`): ``--deployment``, else ``BENCH_DEPLOYMENT``,
else the only ``*/deployment.json`` under ``llmrig_artifacts_dir``. When none of these names one
and no base URL is given either, bench falls back to the demo box: ``scripts/demo`` writes
:data:`DEMO_ENV_FILE` in the checkout (``BENCH_DEPLOYMENT`` and ``BENCH_BASE_URL`` lines, the
address of the box's published engine port on this machine), and its values then count as
environment variables, below the real ones. ``scripts/demo --remove`` deletes it.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.target import Target, environment, find_deployment, resolve
from bench.rig.presets import find_models_file

# Relative to the checkout (the directory that holds group_vars/): where scripts/demo leaves its box's address.
DEMO_ENV_FILE = Path("build") / "demo" / "bench.env"
# The variables that file may set: where the box's record is, and how this machine reaches its engine.
DEMO_NAMES = ("BENCH_DEPLOYMENT", "BENCH_BASE_URL")
_LINE = re.compile(r"^(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>\S*)$")

API_KEY_WARNING = (
    "--api-key puts the key in the process list and the shell history; use --api-key-file or BENCH_API_KEY"
)
TARGET_HELP = (
    "Where requests go: each flag, else its BENCH_* variable, else the deployment.json bench reads (--deployment, "
    "else BENCH_DEPLOYMENT, else the only artifacts/*/deployment.json, else the demo box's: scripts/demo writes "
    "build/demo/bench.env, BENCH_DEPLOYMENT and BENCH_BASE_URL, which bench reads from the checkout by itself "
    "when no base URL is given), else group_vars/all/endpoint.yml."
)


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """Add the "target" group and ``--results-dir`` to a subcommand's parser."""
    target = parser.add_argument_group("target", TARGET_HELP)
    target.add_argument("--base-url", help="OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (env BENCH_BASE_URL)")
    key = target.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-file",
        type=Path,
        help="file whose first line is the API key (env BENCH_API_KEY; default: the key beside deployment.json)",
    )
    key.add_argument("--api-key", help="API key itself: it shows in the process list, so prefer --api-key-file")
    target.add_argument(
        "--model", help="served model name (env BENCH_MODEL; default: deployment.json, else the only one)"
    )
    target.add_argument(
        "--tag", help="results go to RESULTS_DIR/TAG (env BENCH_TAG; default: the deployment's version)"
    )
    target.add_argument(
        "--deployment",
        type=Path,
        help="deployment.json to read (env BENCH_DEPLOYMENT; default: the only artifacts/*/deployment.json, "
        "else the demo box's)",
    )
    add_results_dir(parser)


def add_results_dir(parser: argparse.ArgumentParser) -> None:
    """Add ``--results-dir``: where bench files results, by tag, and reads them back."""
    parser.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="where result files are, by tag (default: results)"
    )


def config_dir_of(args: argparse.Namespace) -> Path | None:
    """The group_vars/all folder of ``--config-dir`` (or the current directory's checkout); None
    when there is none, as when bench runs outside a checkout."""
    try:
        return find_models_file((args.config_dir or Path.cwd()).resolve()).parent
    except ConfigError:
        return None


@dataclass(frozen=True, slots=True)
class Discovery:
    """The deployment.json bench reads, the environment it resolves with, and where any variable
    that is not this process's own came from (the demo's file)."""

    deployment: Path | None
    env: dict[str, str]
    origins: dict[str, str] = field(default_factory=dict)


def read_env_file(path: Path, checkout: Path) -> dict[str, str]:
    """The ``NAME=VALUE`` lines of ``path`` (``#`` comments and blank lines skipped), with a
    relative ``BENCH_DEPLOYMENT`` made absolute under ``checkout``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc}); run scripts/demo again, or scripts/demo --remove") from exc
    values: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line.strip())
        if match is None or match["name"] not in DEMO_NAMES:
            raise ConfigError(f"{path}:{number}: want one of {', '.join(DEMO_NAMES)} as NAME=VALUE, got {line!r}")
        values[match["name"]] = match["value"]
    if "BENCH_DEPLOYMENT" in values:
        values["BENCH_DEPLOYMENT"] = str(checkout / values["BENCH_DEPLOYMENT"])
    return values


def discover(args: argparse.Namespace, config_dir: Path | None) -> Discovery:
    """Which deployment.json to read and the environment to resolve with (see the module docstring)."""
    env = environment()
    named = env.get("BENCH_DEPLOYMENT")
    if args.deployment is None and named:
        if not Path(named).is_file():
            raise ConfigError(f"BENCH_DEPLOYMENT: {named} does not exist")
        return Discovery(Path(named), env)
    deployment = find_deployment(args.deployment, config_dir)
    url_given = bool(getattr(args, "base_url", None) or env.get("BENCH_BASE_URL"))
    if deployment is not None or url_given or config_dir is None:
        return Discovery(deployment, env)
    checkout = config_dir.parent.parent
    demo_file = checkout / DEMO_ENV_FILE
    if not demo_file.is_file():
        return Discovery(None, env)
    demo = read_env_file(demo_file, checkout)
    recorded = demo.get("BENCH_DEPLOYMENT")
    if not recorded or not Path(recorded).is_file():
        raise ConfigError(
            f"{demo_file}: BENCH_DEPLOYMENT {recorded or '(unset)'} does not exist; run scripts/demo again, "
            "or scripts/demo --remove"
        )
    return Discovery(Path(recorded), {**demo, **env}, dict.fromkeys(demo, str(DEMO_ENV_FILE)))


def read_key_file(path: Path) -> str:
    """The API key in the first line of ``path`` (surrounding spaces dropped); never quoted in an error."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--api-key-file: cannot read {path} ({exc.__class__.__name__})") from exc
    key = lines[0].strip() if lines else ""
    if not key:
        raise ConfigError(f"--api-key-file: {path} is empty; its first line must be the key")
    return key


def resolve_target(args: argparse.Namespace, config_dir: Path | None) -> Target:
    """The endpoint, key, model and tag from the flags, the environment, deployment.json and
    group_vars, in that order (and the demo box when nothing names a target)."""
    flags = {name: getattr(args, name) for name in ("base_url", "api_key", "model", "tag")}
    if flags["api_key"]:
        print(f"bench: warning: {API_KEY_WARNING}", file=sys.stderr)
    key_file: Path | None = getattr(args, "api_key_file", None)
    if key_file is not None:
        flags["api_key"] = read_key_file(key_file)
    found = discover(args, config_dir)
    target = resolve(flags, found.env, deployment_path=found.deployment, config_dir=config_dir, origins=found.origins)
    if key_file is not None:
        return replace(target, sources={**target.sources, "api_key": f"--api-key-file ({key_file})"})
    return target
