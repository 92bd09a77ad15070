"""Speculative decoding request by request: vLLM's per-request figures
(``--per-request-spec-decode-metrics summary``, each streamed answer's final usage chunk)
summarised over a level's measured requests.

The server-wide counters (``vllm:spec_decode_num_accepted_tokens_total`` over
``..._num_draft_tokens_total``) pool every draft token, so a long completion weighs as much as
many short ones, and the rate is biased toward long completions (vLLM issue 42690, AIPerf's
per-request report). Here each request weighs the same: the distribution of its own acceptance
rate and acceptance length, beside the pooled rate of the same requests."""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure.metrics import RequestRecord, Summary, summarize


@dataclass(frozen=True, slots=True)
class SpecDecodeRequests:
    """One level's per-request speculative decoding, over the measured requests that reported it."""

    requests: int
    acceptance: Summary  # each request's accepted / proposed draft tokens (requests weigh the same)
    acceptance_length: Summary | None  # each request's tokens per verify step: 1 + accepted / steps
    pooled_acceptance: float  # all accepted over all proposed draft tokens (long answers weigh more)
    zero_acceptance: int  # requests that proposed draft tokens and accepted none


def summarise(records: list[RequestRecord], measured: set[int]) -> SpecDecodeRequests | None:
    """The level's figures over the records whose index is in ``measured`` and that carried the
    server's per-request counts with at least one draft token; None when none did."""
    rated = [
        record
        for record in records
        if record.index in measured and record.spec_accepted is not None and record.spec_drafted
    ]
    if not rated:
        return None
    rates = [float(record.spec_accepted or 0) / float(record.spec_drafted or 1) for record in rated]
    lengths = [1.0 + (record.spec_accepted or 0) / record.spec_steps for record in rated if record.spec_steps]
    acceptance = summarize(rates)
    assert acceptance is not None  # rated is not empty
    return SpecDecodeRequests(
        requests=len(rated),
        acceptance=acceptance,
        acceptance_length=summarize(lengths),
        pooled_acceptance=sum(record.spec_accepted or 0 for record in rated) / sum(r.spec_drafted or 0 for r in rated),
        zero_acceptance=sum(1 for record in rated if record.spec_accepted == 0),
    )
