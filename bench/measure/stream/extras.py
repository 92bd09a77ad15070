"""What a finished stream carries besides its tokens, read into typed values for the record:

- vLLM's per-request speculative decoding (``--per-request-spec-decode-metrics``, the final usage
  chunk's ``metrics.speculative_decoding``): draft tokens accepted and proposed, verify steps;
- the answer's tool calls, put together from their streamed pieces: OpenAI's servers (vLLM)
  send a call's id and name first and its arguments in pieces, all under the call's ``index``;
  llama.cpp sends the same shape; a piece without an ``index`` belongs to the last call, unless
  it brings a new id.
"""

from __future__ import annotations

from typing import Any

from bench.measure.metrics import ToolCall


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def spec_decode(metrics: dict[str, Any] | None) -> tuple[int | None, int | None, int | None]:
    """Draft tokens accepted and proposed and verify steps from vLLM's per-request
    ``metrics.speculative_decoding``; all None when the server sent none (or not as counts)."""
    spec = (metrics or {}).get("speculative_decoding")
    if not isinstance(spec, dict):
        return None, None, None
    found = (
        _count(spec.get("num_accepted_draft_tokens")),
        _count(spec.get("num_draft_tokens")),
        _count(spec.get("num_spec_steps")),
    )
    return found if None not in found else (None, None, None)


def tool_calls(deltas: list[dict[str, Any]]) -> tuple[ToolCall, ...]:
    """The answer's tool calls from the ``delta.tool_calls`` entries of its stream, in order."""
    calls: dict[int, dict[str, str]] = {}
    last = -1
    for piece in deltas:
        if not isinstance(piece, dict):
            continue
        index = piece.get("index")
        if type(index) is not int:
            index = last + 1 if piece.get("id") or last < 0 else last
        last = index
        call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if piece.get("id"):
            call["id"] = str(piece["id"])
        function = piece.get("function")
        if isinstance(function, dict):
            if function.get("name"):
                call["name"] = str(function["name"])
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call["arguments"] += arguments
    return tuple(
        ToolCall(call["id"] or f"call_{index}", call["name"], call["arguments"])
        for index, call in sorted(calls.items())
    )
