"""Mooncake-style request traces: reading and checking one, and building its prompts.

A trace is JSON lines, one request each: ``timestamp`` (milliseconds since the trace began),
``input_length`` and ``output_length`` (tokens), and ``hash_ids``, one id per block of
``block_size`` prompt tokens (Mooncake's traces use 512; AIPerf's ``mooncake_trace`` dataset and
GuideLLM take the size as an option). Two requests whose ``hash_ids`` begin with the same ids
share that prefix; the last block may be partial, so a request has exactly
``ceil(input_length / block_size)`` ids, as AIPerf requires. As in AIPerf, ``timestamp`` may
be a fraction, ``hash_ids`` may be left out (that request shares nothing with the others) and so
may ``output_length`` (the run's ``--output-tokens`` then); other keys are ignored.

Prompts (:class:`TracePrompts`): every hash id stands for a run of vocabulary words drawn from a
generator seeded by the run's salt, its seed and the id, so equal ids give byte-identical text
(and a partial last block is the leading part of its id's full block), and two runs, whose salts
differ, share nothing. The block boundaries are placed by the run's calibration (prompt tokens =
overhead + slope x words), so block *k* ends about ``(k + 1) x block_size`` server tokens into
the prompt and the whole prompt is ``input_length`` tokens long.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.run.prompts import INSTRUCTION, VOCABULARY, Calibration, PromptFactory

TAG_WORDS = 3  # the words PromptFactory puts between the salt and the filler, counted in the calibrated overhead


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One line of a trace; ``line`` is its line number in the file (from 1)."""

    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TraceSource:
    """Which trace a run replayed and how: the file's name and SHA-256, its requests, the speed-up
    its timestamps were divided by, and the prompt tokens each hash id stood for."""

    file: str
    sha256: str
    requests: int
    speedup: float
    block_size: int


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace read and checked: its requests in file order, and where it came from."""

    path: Path
    sha256: str
    requests: tuple[TraceRequest, ...]

    def source(self, speedup: float, block_size: int) -> TraceSource:
        return TraceSource(self.path.name, self.sha256, len(self.requests), speedup, block_size)


def _count(entry: dict[str, object], key: str, where: str, least: int) -> int:
    value = entry.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ConfigError(f"{where}: {key} must be a whole number of at least {least}, got {value!r}")
    return value


def parse_line(text: str, line: int, block_size: int, where: str, output_length: int = 1) -> TraceRequest:
    """One request of a trace (``output_length`` when the line has none); a ConfigError naming
    ``where`` (the flag, the file and the line)."""
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: a request is a JSON object, got {type(entry).__name__}")
    stamp = entry.get("timestamp")
    if not isinstance(stamp, int | float) or isinstance(stamp, bool) or not math.isfinite(stamp) or stamp < 0:
        raise ConfigError(f"{where}: timestamp must be milliseconds since the trace began (0 or more), got {stamp!r}")
    input_length = _count(entry, "input_length", where, 1)
    output_length = _count(entry, "output_length", where, 1) if "output_length" in entry else output_length
    ids = entry.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConfigError(f"{where}: hash_ids must be a list of whole numbers, got {ids!r}")
    blocks = math.ceil(input_length / block_size)
    if ids and len(ids) != blocks:
        raise ConfigError(
            f"{where}: {len(ids)} hash_ids for input_length {input_length}; blocks of {block_size} tokens "
            f"(--trace-block-size) make {blocks}"
        )
    return TraceRequest(line, float(stamp), input_length, output_length, tuple(ids))


def read_trace(path: Path, block_size: int, output_length: int = 1, flag: str = "--trace") -> Trace:
    """Read and check a trace: every line a request, timestamps never going back, at least two
    requests (a level needs two for its window). Blank lines are skipped; a line without
    ``output_length`` asks for ``output_length`` (the run's ``--output-tokens``)."""
    if block_size < 1:
        raise ConfigError(f"--trace-block-size: must be at least 1 token, got {block_size}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot read {path} ({exc.strerror or exc})") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{flag}: {path} is not UTF-8 text") from exc
    requests: list[TraceRequest] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        request = parse_line(line, number, block_size, f"{flag} {path.name} line {number}", output_length)
        if requests and request.timestamp_ms < requests[-1].timestamp_ms:
            raise ConfigError(
                f"{flag} {path.name} line {number}: timestamp {request.timestamp_ms:g} ms is before line "
                f"{requests[-1].line}'s {requests[-1].timestamp_ms:g} ms (timestamps may not go back)"
            )
        requests.append(request)
    if len(requests) < 2:
        raise ConfigError(f"{flag}: {path} has {len(requests)} requests; a trace needs at least 2")
    return Trace(path, hashlib.sha256(data).hexdigest(), tuple(requests))


@dataclass(frozen=True, slots=True)
class TracePrompts:
    """The messages of a trace's requests: equal hash ids give equal blocks of text."""

    prompts: PromptFactory
    calibration: Calibration
    block_size: int

    def words_before(self, tokens: int) -> int:
        """How many words after the salt come before the prompt's token ``tokens`` (0 within the overhead)."""
        return max(0, round((tokens - self.calibration.overhead) / self.calibration.slope) + TAG_WORDS)

    def check(self, request: TraceRequest, flag: str = "--trace") -> None:
        """Refuse a request no longer than the endpoint's fixed prompt overhead."""
        if self.words_before(request.input_length) < 1:
            overhead = self.calibration.overhead - TAG_WORDS * self.calibration.slope  # a trace prompt has no tag
            raise ConfigError(
                f"{flag} line {request.line}: input_length {request.input_length} is not above this endpoint's fixed "
                f"prompt overhead ({overhead:.0f} tokens of chat template, salt and instruction)"
            )

    def block(self, key: str, words: int) -> list[str]:
        """The first ``words`` words of block ``key`` (always the same words for the same key in a run)."""
        generator = random.Random(f"{self.prompts.salt}:{self.prompts.seed}:block:{key}")
        return [generator.choice(VOCABULARY) for _ in range(words)]

    def words(self, request: TraceRequest, index: int) -> list[str]:
        """The words of the prompt after the salt: block by block, each from its hash id (a
        request without hash ids gets blocks of its own, keyed by ``index``)."""
        keys = [str(i) for i in request.hash_ids] or [
            f"request:{index}:{k}" for k in range(math.ceil(request.input_length / self.block_size))
        ]
        out: list[str] = []
        for k, key in enumerate(keys):
            start = self.words_before(k * self.block_size) if k else 0
            end = self.words_before(min((k + 1) * self.block_size, request.input_length))
            out += self.block(key, max(0, end - start))  # a partial block: the leading words of the full one
        return out

    def messages(self, request: TraceRequest, index: int) -> list[dict[str, str]]:
        text = " ".join(self.words(request, index))
        return [{"role": "user", "content": f"{self.prompts.salt} {text}\n{INSTRUCTION}"}]
