"""bench in front of a gateway (docs/gateway.md): of several hosts' deployment.json under the
artifacts, the gateway host's is the one bench reads, its front is where requests go and where
the router's metrics are scraped, and the card names the boxes that served."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from bench.codec import read_as, to_json
from bench.errors import ConfigError
from bench.measure.target import find_deployment, resolve
from bench.rig import DEPLOYMENT_FILE
from bench.rig.clients import PresetCapabilities, client_target
from bench.rig.gateway_record import Gateway
from tests import deployments
from tests.helpers import GROUP_VARS


def _config_dir(tmp_path: Path) -> Path:
    config_dir = tmp_path / "repo" / "group_vars" / "all"
    config_dir.mkdir(parents=True)
    for name in ("engine.yml", "endpoint.yml"):
        shutil.copy(GROUP_VARS / name, config_dir / name)
    return config_dir


def _write(folder: Path, document: object) -> Path:
    path = folder / "deployment.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _gateway_record() -> dict[str, object]:
    return {**deployments.record(), "gateway": deployments.gateway()}


def test_of_several_hosts_bench_reads_the_gateway_hosts_record(tmp_path: Path) -> None:
    config_dir = _config_dir(tmp_path)
    artifacts = tmp_path / "repo" / "artifacts"
    _write(artifacts / "box2", deployments.record())
    gateway = _write(artifacts / "box1", _gateway_record())
    assert find_deployment(None, config_dir) == gateway
    _write(artifacts / "box3", _gateway_record())  # two gateways: bench cannot choose
    with pytest.raises(ConfigError, match=r"--deployment: several hosts have a deployment.json \(box1, box2, box3\)"):
        find_deployment(None, config_dir)


def test_requests_and_scrapes_go_to_the_front(tmp_path: Path) -> None:
    path = _write(tmp_path / "box1", _gateway_record())
    target = resolve({}, {}, deployment_path=path, config_dir=None)
    assert target.base_url == "http://box1:8002/v1"
    assert target.metrics_url == "http://box1:8002/metrics"
    assert target.deployment is not None
    assert target.deployment.endpoint.base_url != target.base_url  # the box's own engine stays recorded


def test_clients_are_pointed_at_the_front_with_the_key(tmp_path: Path) -> None:
    """Even an Ollama box (no key of its own): the gateway's front requires the key."""
    record = deployments.deployment("ollama", env={"OLLAMA_CONTEXT_LENGTH": "8192"})
    gateway = read_as(Gateway, deployments.gateway(), "gateway")
    target = client_target(
        dataclasses.replace(record, gateway=gateway), PresetCapabilities("", "", ()), artifacts=tmp_path
    )
    assert (target.base_url, target.key_env) == ("http://box1:8002/v1", "LLMRIG_API_KEY")


def test_the_record_round_trips_with_its_gateway() -> None:
    document = DEPLOYMENT_FILE.to_document(DEPLOYMENT_FILE.parse(_gateway_record(), "d"))
    assert document["gateway"] == deployments.gateway()
    again = to_json(DEPLOYMENT_FILE.parse(document, "d"))
    assert isinstance(again, dict)
    assert again["gateway"] == deployments.gateway()
