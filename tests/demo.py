"""What ``scripts/demo`` writes and says at its end: the environment file through which bench
finds the demo box, the closing block (the URLs, what the tiny model cannot do, the next three
commands), and for ``scripts/demo --remove`` what stays on disk, measured with du, and how to
remove it too.

``python -m tests.demo env BASE_URL``, ``python -m tests.demo ending ...`` and
``python -m tests.demo leftovers --image IMAGE`` print or write them, from the repository root.
Standard library only: ``--remove`` may run where the virtualenv is gone.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DEMO = Path("build") / "demo"
# Where bench looks for the demo box (bench.cli.target.DEMO_ENV_FILE; a test compares them).
ENV_FILE = DEMO / "bench.env"
INVENTORY = DEMO / "inventory"
ARTIFACTS = DEMO / "artifacts" / "box"  # tests.box.HOST's artifacts
MODEL = "gemma3-270m"
ADMIN_EMAIL = "admin@llmrig.example"
# What the demo leaves in the checkout: (path, what it holds); .venv last, everything here runs from it.
LEFT = (
    ("build", "the test rig (scripts/testrig): the wheelhouse for the box's offline installs, the image tarball"),
    ("results", "what bench run and bench probe filed, by tag (every tag of this checkout, not only the demo's)"),
    ("reports", "the pages bench report wrote"),
    (".venv", "bench and Ansible (scripts/setup), which everything here runs from"),
)


def write_env(root: Path, base_url: str) -> Path:
    """Write :data:`ENV_FILE` under ``root``: the demo box's deployment.json (relative to the
    checkout) and the engine's published address on this machine. No secret: bench reads the
    API key from its 0600 file beside deployment.json."""
    path = root / ENV_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (
        "# Written by scripts/demo: how bench reaches the demo box from this machine. bench reads it by itself\n"
        "# from the checkout when no flag, BENCH_* variable or artifacts/*/deployment.json names a target.\n"
        f"BENCH_DEPLOYMENT={ARTIFACTS / 'deployment.json'}\n"
        f"BENCH_BASE_URL={base_url}\n"
    )
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class Step:
    """One next command and what it does."""

    what: str
    command: str


def next_steps() -> list[Step]:
    """The three commands a newcomer runs next, from the repository root."""
    return [
        Step("provision the box again (a second run changes nothing)", f"ansible-playbook -i {INVENTORY} site.yml"),
        Step(
            "a short bench run, filed under results/<the deployment's tag>/",
            "bench run single --requests 8 --input-tokens 128 --output-tokens 32",
        ),
        Step("what the model can and cannot do (tool calls, reasoning, limits), filed beside it", "bench probe"),
    ]


def ending(seconds: int, webui_url: str, base_url: str, container: str) -> str:
    """The block the demo ends with."""
    lines = [
        f"== demo: done in {seconds} s",
        f"Open WebUI:  {webui_url}   (from this machine only)",
        f"  login:     {ADMIN_EMAIL}, password in {ARTIFACTS / 'open_webui_admin_password'}",
        f"Engine:      {base_url}   (API key in {ARTIFACTS / 'api_key'}; the same URL whichever engine serves)",
        f"The model:   {MODEL} is a tiny base model. It answers in one line only with a stop string (the chat",
        '             above sends stop=["\\n"], and so does Open WebUI); without one it runs on to max_tokens.',
        "             It has no tool-call format and does not reason: a request with tools gets a clean 400,",
        "             and no reasoning comes back. bench probe reports those checks as expected failures, and",
        "             bench compare then shows its tag but does not rank it (--include-failing ranks it anyway).",
        f"Next, from this directory (bench finds the demo box by itself, through {ENV_FILE}):",
    ]
    for step in next_steps():
        lines += [f"  {step.what}:", f"    {step.command}"]
    lines += [
        "Switch the box to llama.cpp, at the same Engine URL (run it again without -e to go back to vLLM):",
        f"    ansible-playbook -i {INVENTORY} site.yml -e inference_engine=llamacpp",
        f"Look around: podman exec -it {container} bash     Remove: scripts/demo --remove",
    ]
    return "\n".join(lines)


def disk_usage(*paths: Path) -> str:
    """``du -shc`` of ``paths``: their size on disk together, as du spells it (3.4G, 120K)."""
    done = subprocess.run(["du", "-shc", *map(str, paths)], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()[-1].split()[0]


def image_size(image: str) -> str | None:
    """The size of ``image`` in podman's storage (``podman image inspect``), None without it."""
    try:
        done = subprocess.run(
            ["podman", "image", "inspect", "--format", "{{.Size}}", image], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        return None
    return f"{int(done.stdout.strip()) / 1e9:.1f}G"


def leftovers(root: Path, image: str | None) -> str:
    """What stays after ``scripts/demo --remove`` under ``root``, with sizes, and how to remove it."""
    here = [(name, what, disk_usage(root / name)) for name, what in LEFT if (root / name).exists()]
    size = image_size(image) if image else None
    if not here and size is None:
        return "demo: nothing else of the demo is left"
    total = disk_usage(*(root / name for name, _, _ in here)) if here else "0"
    lines = [f"demo: left in place for the next run, {total} in this checkout (sizes from du):"]
    lines += [f"  {name + '/':<9}{used:>6}  {what}" for name, what, used in here]
    if size is not None:
        lines.append(f"  {'':<9}{size:>6}  the podman image {image}, in podman's own storage")
    lines.append("to remove those too, from this directory:")
    data = [name for name, _, _ in here if name != ".venv"]
    if data:
        lines.append(f"  rm -rf {' '.join(data)}")
    if size is not None:
        lines.append(f"  podman rmi {image}")
    if any(name == ".venv" for name, _, _ in here):
        lines.append("  rm -rf .venv        (last: bench and ansible-playbook go with it)")
    lines.append(
        "podman, runc, debootstrap and chromium stay installed (scripts/testrig apt-get installs them where missing)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.demo", description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    env = actions.add_parser("env", help=f"write {ENV_FILE}")
    env.add_argument("base_url")
    end = actions.add_parser("ending", help="print the closing block")
    end.add_argument("--seconds", type=int, required=True)
    end.add_argument("--webui-url", required=True)
    end.add_argument("--base-url", required=True)
    end.add_argument("--container", required=True)
    left = actions.add_parser("leftovers", help="print what --remove leaves")
    left.add_argument("--image")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if args.action == "env":
        write_env(root, args.base_url)
        print(f"wrote {ENV_FILE}: bench reaches the demo box at {args.base_url} without flags")
    elif args.action == "ending":
        print(ending(args.seconds, args.webui_url, args.base_url, args.container))
    else:
        print(leftovers(root, args.image))
    return 0


if __name__ == "__main__":
    sys.exit(main())
