"""bench capacity against llama.cpp's own server (xllamacpp) with two slots, pinned to core 1
while bench runs on core 0: a third stream has no slot and waits for one to free, its TTFT grows
by most of an answer, so the capacity found under a TTFT bound is at most the slot count.

The bounds are chosen far from what the server does either way: an answer of 32 tokens takes
about 2 s on one core, so a stream beyond the slots waits well over the 1.5 s bound, while a
64-token prompt in a free slot starts in well under it; the decode floor (2 tok/s) only catches
a broken server. The context search runs to 128 prompt tokens (the slot holds 2,048). A level
passes when 0.8 of its requests meet the bounds at 80% confidence: 7 measured requests, all met,
show it (the Wilson bound of 7 of 7 is 0.81), so one batch of 8 at one stream (one is warm-up)
passes, and the test keeps to about a minute of the serial tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from bench.codec import to_json
from bench.measure.capacity import result as capacity_results
from tests.helpers import BIN, REPO
from tests.integration.test_real_engines import KEY, Server

pytestmark = pytest.mark.integration
SLOTS = 2


def test_llamacpp_capacity_is_its_slot_count(llamacpp: Server, tmp_path: Path) -> None:
    """No level beyond the slot count passes (its waiting streams miss the TTFT bound), so the
    answer, when there is one, is at most the slots (2 when the machine is quiet); one stream
    keeps the decode floor up to 128 prompt tokens; the capacity file matches its schema and
    reads back whole."""
    assert llamacpp.command[llamacpp.command.index("--parallel") + 1] == str(SLOTS)  # the shared server's slots
    results = tmp_path / "results"
    command = ["taskset", "-c", "0", str(BIN / "bench"), "capacity", "--base-url", llamacpp.base_url]
    command += ["--api-key", KEY, "--tag", "integration", "--results-dir", str(results)]
    command += ["--min-decode", "2", "--max-ttft", "1.5", "--max-concurrency", "4", "--input-tokens", "64"]
    command += ["--target-attainment", "0.8", "--confidence", "0.8"]
    command += ["--output-tokens", "32", "--requests", "8", "--context-requests", "8", "--max-context", "128"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, check=False, cwd=REPO, env=dict(os.environ, COLUMNS="160")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout, file=sys.stderr)
    (path,) = (results / "integration" / "capacity").glob("*.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    schema = json.loads(capacity_results.CAPACITY_FILE.schema_file.read_text(encoding="utf-8"))
    problems = [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(document)]
    assert not problems, problems[:10]
    result = capacity_results.CAPACITY_FILE.read(path)
    assert to_json(result) == document
    users = result.max_users
    assert users.outcome in ("found", "inconclusive"), users
    assert users.value is None or 1 <= users.value <= SLOTS
    beyond = [probe for probe in result.probes if probe.axis == "concurrency" and probe.value > SLOTS]
    assert beyond, "no level beyond the slots was measured"
    for probe in beyond:
        assert probe.verdict != "pass"
        assert probe.requests_met < probe.requests_measured
    context = result.longest_context
    assert context is not None
    assert (context.outcome, context.value) == ("cap_passed", 128)
    assert [p.value for p in result.probes if p.axis == "context"] == [64, 128]
    assert all(batch.requests.errored == 0 for p in result.probes for batch in p.batches)
