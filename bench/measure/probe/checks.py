"""The probe's checks, each one real request to the endpoint, and the probe that runs them.

Besides the tool-call checks of :mod:`~bench.measure.probe.tools`:

- ``reasoning_field``: thinking on, the reasoning comes in ``reasoning`` (or the older
  ``reasoning_content``) and no ``<think>`` tag is in ``content``;
- ``thinking_off_answers``: ``chat_template_kwargs {"enable_thinking": false}``: an answer still
  comes in ``content``, without think tags;
- ``over_context_400``: a prompt longer than the served context gets HTTP 400 with an error
  body, not a 5xx, a 200 or no answer;
- ``response_format_json_schema``: a ``json_schema`` response format: the content parses and
  validates against the schema;
- ``served_context_matches``: ``/v1/models`` reports the context the deployment configured (not
  run when either side is not known);
- ``spec_decode_accepts``: with speculative decoding, the answer's per-request
  ``metrics.speculative_decoding`` (vLLM's ``--per-request-spec-decode-metrics``) accepted at
  least one draft token: a checkpoint whose MTP head a quantizer dropped drafts garbage and
  accepts none, which only slows decoding (not run when the server sends no such figures).

Checks run one after another, never concurrently, each with its own deadline.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from statistics import median

from jsonschema import Draft202012Validator

from bench.codec import JsonObject
from bench.measure.probe.clients import CLIENT_TITLES, client_requests, replay_client
from bench.measure.probe.expect import Expectations
from bench.measure.probe.http import (
    THINK_TAG,
    CheckFailed,
    Outcome,
    Probe,
    chat_answer,
    chat_message,
    error_message,
    first_answer_ms,
    post_chat,
    snippet,
)
from bench.measure.probe.result import TTFO_RUNS, CheckResult, ProbeResult
from bench.measure.probe.tools import (
    tool_args_schema,
    tool_call_single,
    tool_calls_parallel,
    tool_choice_required,
    tool_name_punctuation,
)
from bench.measure.run.benchmark import pick_model
from bench.measure.stream.client import ChatClient, Endpoint
from bench.measure.target import Target


async def reasoning_field(probe: Probe) -> Outcome:
    """Thinking on: reasoning in its own field, none of it (no think tag) in content."""
    body: JsonObject = {
        "messages": [{"role": "user", "content": "What is 12 + 30? Think it through, then give the number."}],
        "max_tokens": 128,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    message = await chat_message(probe, body)
    content = str(message.get("content") or "")
    if THINK_TAG.search(content):
        return False, f"think tags in content: {snippet(content)}"
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    if not reasoning:
        return False, f"no reasoning or reasoning_content; content: {snippet(content)}"
    return True, f"reasoning {snippet(reasoning, 40)}, content {snippet(content, 30)}"


async def thinking_off_answers(probe: Probe) -> Outcome:
    """Thinking off per request: an answer still comes in content."""
    body: JsonObject = {
        "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        "max_tokens": 32,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    content = str((await chat_message(probe, body)).get("content") or "")
    if THINK_TAG.search(content):
        return False, f"think tags in content: {snippet(content)}"
    if not content.strip():
        return False, "empty content with thinking off"
    return True, f"content {snippet(content)}"


async def over_context_400(probe: Probe) -> Outcome:
    """A prompt longer than the served context: HTTP 400 with an error body."""
    if probe.served_context is None:
        return None, "the server does not report its context length in /v1/models"
    words = probe.served_context + 256  # one token per repeated word, plus the template's
    body: JsonObject = {"messages": [{"role": "user", "content": "hello " * words}], "max_tokens": 1}
    status, parsed, text = await post_chat(probe, body)
    message = error_message(parsed, text)
    if status == 400 and isinstance(parsed, dict) and message != text:
        return True, f"HTTP 400: {snippet(message, 80)}"
    if status == 200:
        return False, f"HTTP 200: a prompt of about {words} tokens was accepted (served context {probe.served_context})"
    return False, f"HTTP {status}, want 400 with an error body: {snippet(message, 80)}"


ANSWER_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Lyon", "Nice"]}, "is_capital": {"type": "boolean"}},
    "required": ["city", "is_capital"],
    "additionalProperties": False,
}


async def response_format_json_schema(probe: Probe) -> Outcome:
    """A json_schema response format: the content parses and validates."""
    prompt = "Which French city is the capital? Answer as JSON with the keys city and is_capital."
    body: JsonObject = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 64,
        "chat_template_kwargs": {"enable_thinking": False},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "capital", "schema": ANSWER_SCHEMA, "strict": True},
        },
    }
    message, finish = await chat_answer(probe, body)
    content = str(message.get("content") or "")
    try:
        answer = json.loads(content)
    except json.JSONDecodeError:
        return False, f"content is not JSON (finish_reason {finish}): {snippet(content)}"
    error = next(iter(Draft202012Validator(ANSWER_SCHEMA).iter_errors(answer)), None)
    if error is not None:
        return False, f"does not validate: {snippet(error.message, 80)}"
    return True, f"content {snippet(json.dumps(answer, separators=(',', ':')))}"


async def served_context_matches(probe: Probe) -> Outcome:
    """/v1/models reports the context length the deployment configured."""
    expected, source = probe.expected.context, probe.expected.context_source
    if expected is None:
        return None, "expected context not known (no --max-model-len in deployment.json; --expect-context)"
    if probe.served_context is None:
        return None, f"the server does not report its context length; expected {expected} ({source})"
    verdict = probe.served_context == expected
    return verdict, f"served {probe.served_context}, expected {expected} ({source})"


async def spec_decode_accepts(probe: Probe) -> Outcome:
    """Speculative decoding accepts drafts: a plain answer of about 100 tokens accepted at least one."""
    body: JsonObject = {
        "messages": [{"role": "user", "content": "Count from one to forty in words, separated by commas."}],
        "max_tokens": 128,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    status, parsed, text = await post_chat(probe, body)
    if status != 200:
        raise CheckFailed(f"HTTP {status}: {snippet(error_message(parsed, text), 70)}")
    metrics = parsed.get("metrics") if isinstance(parsed, dict) else None
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return None, "no per-request speculative decoding in the answer (no MTP, or vllm_per_request_metrics off)"
    accepted, drafted = spec.get("num_accepted_draft_tokens"), spec.get("num_draft_tokens")
    if not isinstance(accepted, int) or not isinstance(drafted, int) or drafted <= 0:
        return None, f"no draft tokens counted: {snippet(json.dumps(spec), 80)}"
    if accepted == 0:
        return False, (
            f"0 of {drafted} draft tokens accepted: the checkpoint's MTP head is missing or broken "
            "(a quantization that drops it); turn vllm_mtp off or use a checkpoint that keeps it"
        )
    return True, f"{accepted} of {drafted} draft tokens accepted ({accepted / drafted:.0%})"


Check = Callable[[Probe], Awaitable[Outcome]]
CHECKS: dict[str, Check] = {
    check.__name__: check
    for check in (
        tool_call_single,
        tool_calls_parallel,
        tool_choice_required,
        tool_name_punctuation,
        tool_args_schema,
        reasoning_field,
        thinking_off_answers,
        over_context_400,
        response_format_json_schema,
        served_context_matches,
        spec_decode_accepts,
    )
}


async def _one(probe: Probe, name: str) -> CheckResult:
    try:
        passed, detail = await CHECKS[name](probe)
    except CheckFailed as failed:
        passed, detail = False, str(failed)
    expected = name in probe.expected.absent and passed is not None
    if expected and not passed:
        detail = f"{detail} (expected: {probe.expected.absent[name]})"
    return CheckResult(name, bool(passed), detail, expected_failure=expected, ran=passed is not None)


async def run_probe(
    target: Target, expected: Expectations, names: Sequence[str], timeout_s: float, clients: Sequence[str] = ()
) -> ProbeResult:
    """Run the checks ``names`` (in :data:`CHECKS` order) against ``target``, one at a time, then
    replay the requests of the agent ``clients`` (in :data:`CLIENT_TITLES` order)."""
    started = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    endpoint = Endpoint(target.base_url, target.model or "", target.api_key, timeout_s, timeout_s)
    async with ChatClient(endpoint, max_connections=1) as client:
        model, served_context = pick_model(await client.model_list(), target)
        probe = Probe(client.http, model, served_context, expected, timeout_s)
        checks = [await _one(probe, name) for name in CHECKS if name in names]
        on, off = await time_to_first_answer(probe, thinking=True), await time_to_first_answer(probe, thinking=False)
        recorded = client_requests()
        replayed = [await replay_client(probe, recorded[name]) for name in CLIENT_TITLES if name in clients]
    return ProbeResult(target.tag, started, target.base_url, model, checks, on, off, replayed if clients else None)


async def time_to_first_answer(probe: Probe, *, thinking: bool) -> float | None:
    """The median time to the first answer token of TTFO_RUNS streamed questions, thinking on or
    off (``chat_template_kwargs``; a model without a thinking switch ignores it)."""
    body: JsonObject = {
        "messages": [{"role": "user", "content": "In one sentence: why is the sky blue?"}],
        "max_tokens": 2048 if thinking else 256,
        "chat_template_kwargs": {"enable_thinking": thinking},
    }
    times = [await first_answer_ms(probe, body) for _ in range(TTFO_RUNS)]
    measured = [value for value in times if value is not None]
    return median(measured) if measured else None
