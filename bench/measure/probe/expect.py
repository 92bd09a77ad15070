"""What a deployment says a probe should find: the checks expected to fail, and the context.

For vLLM the command line recorded in deployment.json (``vllm.args``) decides: no
``--enable-auto-tool-choice`` with a ``--tool-call-parser`` means tool calls in ``auto`` mode
cannot come back as ``tool_calls``, and no ``--tool-call-parser`` at all also refuses
``tool_choice`` required (vLLM answers 400); no ``--reasoning-parser`` means thinking text stays in
``content``; ``--max-model-len`` is the context the server should report. Other engines record no
such flags, so the model preset's ``tool_call_parser`` and ``reasoning_parser`` stand in for them
(an empty one: the model has no tool-call or reasoning format). Without a deployment nothing is
expected to fail, and the context is only known when given (``--expect-context``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.rig import Deployment, context_tokens, flag_value, has_flag

# The checks that ask for tool calls in tool_choice "auto" mode, which needs a tool-call parser.
AUTO_TOOL_CHECKS = ("tool_call_single", "tool_calls_parallel", "tool_name_punctuation", "tool_args_schema")
TOOL_CHECKS = (*AUTO_TOOL_CHECKS, "tool_choice_required")  # required needs a tool-call parser too
REASONING_CHECKS = ("reasoning_field",)


@dataclass(frozen=True, slots=True)
class PresetFacts:
    """The capability fields of the deployed model preset (empty string: the model has none)."""

    tool_call_parser: str
    reasoning_parser: str


@dataclass(frozen=True, slots=True)
class Expectations:
    """Why each check is expected to fail (by name), and the context length the endpoint should
    serve with where said (``context_source`` names where it came from)."""

    absent: dict[str, str] = field(default_factory=dict)
    context: int | None = None
    context_source: str = ""


def _vllm(args: list[str]) -> Expectations:
    absent: dict[str, str] = {}
    if not flag_value(args, "--tool-call-parser"):
        absent.update(dict.fromkeys(TOOL_CHECKS, "vllm.args has no --tool-call-parser"))
    elif not has_flag(args, "--enable-auto-tool-choice"):
        absent.update(dict.fromkeys(AUTO_TOOL_CHECKS, "vllm.args has no --enable-auto-tool-choice"))
    if not flag_value(args, "--reasoning-parser"):
        absent.update(dict.fromkeys(REASONING_CHECKS, "vllm.args has no --reasoning-parser"))
    length = flag_value(args, "--max-model-len")
    context = context_tokens(length) if length else None
    source = f"deployment.json vllm.args --max-model-len {length}" if context else ""
    return Expectations(absent, context, source)


def _preset(preset: PresetFacts, name: str) -> Expectations:
    absent: dict[str, str] = {}
    if not preset.tool_call_parser:
        absent.update(dict.fromkeys(TOOL_CHECKS, f"preset {name} has no tool_call_parser"))
    if not preset.reasoning_parser:
        absent.update(dict.fromkeys(REASONING_CHECKS, f"preset {name} has no reasoning_parser"))
    return Expectations(absent)


def expectations(deployment: Deployment | None, *, preset: PresetFacts | None = None) -> Expectations:
    """What ``deployment`` (deployment.json as read; None: there is none) and the facts of its
    ``preset`` say the probe will find."""
    if deployment is None:
        return Expectations()
    args = deployment.section.args
    if deployment.engine == "vllm" and args is not None:
        return _vllm(args)
    if preset is not None:
        return _preset(preset, deployment.preset or "?")
    return Expectations()
