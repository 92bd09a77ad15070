"""Engine command lines read back: the one parser of a recorded argument list.

deployment.json records each engine's arguments as its role wrote them (``vllm.args``,
``llamacpp.args``); bench reads flags out of them for the planner's replay, the probe's
expectations, the weights each GPU streams and the facts ``bench compare`` shows. Every reader
goes through :func:`parse_flags`, which reads a list the way the engines' own argument parsers
(Python's argparse in vLLM, llama.cpp's ``common_params_parse``) do:

- a token that starts with ``-`` and a letter is a flag (``--max-model-len``, ``-tp``, ``-c``);
  ``-1`` and ``-0.5`` are values;
- ``--flag=value`` carries its value inline; otherwise the next token is the flag's value unless
  it is a flag itself, and a flag with no value is a switch (``--enforce-eager``);
- a long flag is spelled with dashes: vLLM accepts ``--max_model_len`` for ``--max-model-len``;
- the last occurrence of a flag wins, as argparse keeps the last value.

A token that is neither a flag nor a flag's value (a positional argument) is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_FLAG = re.compile(r"^--?[A-Za-z]")
SWITCH = None  # the value of a flag given without one


def flag_name(token: str) -> str | None:
    """The flag ``token`` names, in its dashed spelling (``--max_model_len=4096`` is
    ``--max-model-len``); None when ``token`` is not a flag."""
    if not _FLAG.match(token):
        return None
    name = token.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def parse_flags(args: Sequence[str]) -> dict[str, str | None]:
    """Every flag of ``args`` with its last value (None: a switch), in the order first given."""
    found: dict[str, str | None] = {}
    index = 0
    while index < len(args):
        token = str(args[index])
        index += 1
        name = flag_name(token)
        if name is None:
            continue
        if "=" in token and token.startswith("--"):
            found[name] = token.split("=", 1)[1]
        elif index < len(args) and flag_name(str(args[index])) is None:
            found[name] = str(args[index])
            index += 1
        else:
            found[name] = SWITCH
    return found


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value ``flag`` has in ``args`` (its last one); None when it is absent or a switch."""
    return parse_flags(args).get(flag)


def has_flag(args: Sequence[str], flag: str) -> bool:
    """Whether ``args`` give ``flag`` at all (with a value or as a switch)."""
    return flag in parse_flags(args)


def context_tokens(value: str) -> int | None:
    """A ``--max-model-len`` value in tokens (``32k`` = 32000, ``32K`` = 32768, as vLLM reads
    it); None for ``auto``/``-1`` (vLLM picks) or anything else it does not read as a length."""
    match = re.fullmatch(r"(\d+)([kKmM]?)", value.strip())
    if match is None:
        return None
    number, suffix = int(match[1]), match[2]
    scale = {"": 1, "k": 1000, "K": 1024, "m": 1_000_000, "M": 1024 * 1024}[suffix]
    return number * scale
