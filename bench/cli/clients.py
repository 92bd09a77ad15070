"""``bench clients``: write the agents' configurations from deployment.json, or check written ones."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console

from bench.cli.target import config_dir_of, discover
from bench.errors import ConfigError
from bench.rig import read_deployment
from bench.rig.clients import (
    CLIENT_NAMES,
    HERMES_MIN_CONTEXT,
    KEY_ENV,
    WRITERS,
    ClientTarget,
    PresetCapabilities,
    client_target,
    hermes_compaction_at,
    stale_fields,
    write_files,
)
from bench.rig.presets import find_models_file, load_presets
from bench.rig.rules.network import is_loopback

STALE_EXIT = 4  # bench clients --check: a written configuration no longer matches the server

EXAMPLES = """\
examples:
  bench clients                            every client's configuration into clients/
  bench clients --client opencode aider    only those two
  bench clients --check --out ../my-repo   exit 4, naming each stale field, when the server changed
  bench clients --base-url https://llm.lan:8443/v1   the address your clients use, if not the recorded one
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench clients``."""
    parser = commands.add_parser(
        "clients",
        help="write OpenCode, Aider, Continue, Hermes Agent and OpenAI SDK configurations for the server",
        description="Write the configuration files that point each agent at the deployed server (its URL, model "
        "name, context and answer length, tool calls and reasoning, the CA over https), from deployment.json. "
        f"The API key is never written: each file reads it from the environment variable {KEY_ENV}. "
        "With --check, compare files written earlier with the server as deployed now instead.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--client",
        nargs="+",
        choices=CLIENT_NAMES,
        default=list(CLIENT_NAMES),
        metavar="NAME",
        help=f"which clients ({', '.join(CLIENT_NAMES)}; default: all)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("clients"), help="the folder to write or check (default: clients)"
    )
    parser.add_argument(
        "--check", action="store_true", help="check the files in --out against the server; write nothing"
    )
    parser.add_argument("--force", action="store_true", help="overwrite files edited since bench wrote them")
    parser.add_argument(
        "--key-env", default=KEY_ENV, help=f"the environment variable the files read the key from (default {KEY_ENV})"
    )
    parser.add_argument(
        "--deployment",
        type=Path,
        help="deployment.json to read (env BENCH_DEPLOYMENT; default: the only artifacts/*/deployment.json, "
        "the gateway host's of several, else the demo box's)",
    )
    parser.add_argument(
        "--base-url",
        help="the API's URL as your clients reach it "
        "(env BENCH_BASE_URL; default: deployment.json's endpoint.base_url, or on a gateway host its gateway.base_url)",
    )


def _check_reachable(recorded: str, given: str, source: str) -> None:
    """Refuse a URL the box's firewall does not admit from the client networks: the recorded
    endpoint on the box's loopback, or another port of the box than the API's."""
    want, got = urlsplit(recorded), urlsplit(given or recorded)
    if not given and is_loopback(want.hostname or ""):
        raise ConfigError(
            f"deployment.json's client URL {recorded} is the box's loopback, which no client on another machine "
            "reaches (reverse_proxy_host); pass --base-url with the address your clients use"
        )
    if given and got.hostname == want.hostname and got.port != want.port:
        raise ConfigError(
            f"{source}: {given} is port {got.port} of the box, which its firewall does not open to the client networks "
            f"(llmrig_allowed_client_cidrs reach the API at {recorded} only)"
        )


def _target(args: argparse.Namespace) -> ClientTarget:
    config_dir = config_dir_of(args)
    found = discover(args, config_dir)
    if found.deployment is None:
        raise ConfigError(
            "bench clients needs a deployment.json: --deployment, BENCH_DEPLOYMENT, or the one site.yml fetches to "
            "artifacts/<host>/"
        )
    deployment = read_deployment(found.deployment)
    given = args.base_url or found.env.get("BENCH_BASE_URL", "")
    source = "--base-url" if args.base_url else found.origins.get("BENCH_BASE_URL", "BENCH_BASE_URL")
    _check_reachable(deployment.client_base_url, given, source)
    # config_dir_of found the checkout's models.yml already; without one, find_models_file says so.
    presets = load_presets(
        config_dir / "models.yml" if config_dir else find_models_file((args.config_dir or Path.cwd()).resolve())
    )
    if deployment.preset not in presets:
        raise ConfigError(f"deployment.json preset {deployment.preset!r} is not in group_vars/all/models.yml")
    preset = presets[deployment.preset]
    capabilities = PresetCapabilities(preset.tool_call_parser, preset.reasoning_parser, preset.stop)
    return client_target(
        deployment, capabilities, artifacts=found.deployment.parent, base_url=given, key_env=args.key_env
    )


def _usage(target: ClientTarget, out: Path, clients: list[str]) -> list[str]:
    """How to run each client with its files (the key exported from the controller's copy)."""
    key = f'export {target.key_env}="$(cat {target.key_file})"' if target.key_env else ""
    ca = f"export NODE_EXTRA_CA_CERTS={target.ca_file}  # OpenCode and Continue trust the CA" if target.ca_file else ""
    lines = [line for line in (key, ca) if line]
    usage = {
        "opencode": f'OPENCODE_CONFIG={out}/opencode.json opencode run "..."',
        "aider": f"copy {out}/aider/.aider.* into your repository's root, then there: "
        + (f'OPENAI_API_KEY="${target.key_env}" ' if target.key_env else "")
        + (f"SSL_VERIFY={target.ca_file} " if target.ca_file else "")
        + 'aider --message "..."',
        "continue": f'cn --config {out}/continue/config.yaml -p "..." --auto',
        "hermes": f"cp {out}/hermes/config.yaml ~/.hermes/ (or, for a team: hermes profile install "
        f"{out}/hermes/profile --name llmrig; hermes -p llmrig chat)",
        "openai": f"set -a; . {out}/openai.env; set +a"
        + (f'; export OPENAI_API_KEY="${target.key_env}"' if target.key_env else ""),
    }
    return lines + [f"{name}: {usage[name]}" for name in clients]


def _no_tools(target: ClientTarget) -> str:
    if target.engine == "vllm":
        return "vLLM runs without --enable-auto-tool-choice and a --tool-call-parser: vllm_tool_call_parser"
    return f"preset {target.preset} has no tool_call_parser"


def command(args: argparse.Namespace, console: Console) -> int:
    """Write the configurations (or check them with --check)."""
    clients = list(dict.fromkeys(args.client))
    target = _target(args)
    if args.check:
        if args.out.exists() and not args.out.is_dir():
            raise ConfigError(f"--out: {args.out} is a file, not a folder")
        checked, stale = stale_fields(args.out, target, tuple(clients))
        if not checked:
            raise ConfigError(f"--check: {args.out} holds no configuration of {', '.join(clients)}; write them first")
        for entry in stale:
            console.print(entry.line(), markup=False, highlight=False, soft_wrap=True)
        console.print(
            f"checked {len(checked)} files in {args.out}: {len(stale)} stale fields", highlight=False, soft_wrap=True
        )
        return STALE_EXIT if stale else 0
    files = {name: text for client in clients for name, text in WRITERS[client](target).items()}
    written = write_files(args.out, files, force=args.force)
    tools, reasoning = "yes" if target.tools else "no", "separated" if target.reasoning else "none"
    console.print(
        f"{target.served_name} at {target.base_url} ({target.engine}, preset {target.preset}): context "
        f"{target.context:,} tokens, answers up to {target.max_output:,}, tool calls {tools}, reasoning {reasoning}",
        highlight=False,
        soft_wrap=True,
    )
    for name in written:
        console.print(f"wrote {args.out / name}", markup=False, highlight=False, soft_wrap=True)
    agents = [name for name in ("opencode", "continue", "hermes") if name in clients]
    if agents and not target.tools:
        console.print(
            f"{', '.join(agents)}: the server returns no tool calls ({_no_tools(target)}), and these agents always "
            "offer their tools, so their requests fail; Aider edits without tools",
            highlight=False,
            soft_wrap=True,
        )
    if "hermes" in clients:
        if target.context < HERMES_MIN_CONTEXT:
            console.print(
                f"hermes: the server's context of {target.context:,} tokens is below Hermes Agent's minimum of "
                f"{HERMES_MIN_CONTEXT:,}; Hermes refuses to start with it",
                highlight=False,
                soft_wrap=True,
            )
        else:
            console.print(
                f"hermes: compacts at about {hermes_compaction_at(target):,} tokens", highlight=False, soft_wrap=True
            )
    for line in _usage(target, args.out, clients):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
