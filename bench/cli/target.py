"""The target flags that every measuring command shares (``--base-url``, ``--api-key``,
``--model``, ``--tag``, ``--deployment``, ``--results-dir``) and their resolution, exactly as
``bench run`` resolves them (:mod:`bench.measure.target`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.target import Target, environment, find_deployment, resolve
from bench.rig.presets import find_models_file


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """Add the "target" group and ``--results-dir`` to a subcommand's parser."""
    target = parser.add_argument_group("target")
    target.add_argument("--base-url", help="OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (env BENCH_BASE_URL)")
    target.add_argument(
        "--api-key", help="API key (env BENCH_API_KEY; default: the key fetched beside deployment.json)"
    )
    target.add_argument(
        "--model", help="served model name (env BENCH_MODEL; default: deployment.json, else the only one)"
    )
    target.add_argument(
        "--tag", help="results go to RESULTS_DIR/TAG (env BENCH_TAG; default: the deployment's version)"
    )
    target.add_argument(
        "--deployment", type=Path, help="deployment.json to read (default: the only artifacts/*/deployment.json)"
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


def resolve_target(args: argparse.Namespace, config_dir: Path | None) -> Target:
    """The endpoint, key, model and tag from the flags, the environment, deployment.json and
    group_vars, in that order."""
    flags = {name: getattr(args, name) for name in ("base_url", "api_key", "model", "tag")}
    deployment = find_deployment(args.deployment, config_dir)
    return resolve(flags, environment(), deployment_path=deployment, config_dir=config_dir)
