"""The preflight rules over the engine boxes behind a gateway (bench.rig.group), on recorded facts:
each finding names the box and the knob, never the key; one box's lines are not repeated."""

from __future__ import annotations

from typing import Any

import pytest

from bench.errors import ConfigError
from bench.rig.group import gateway_sources, group_problems

KEY = "a" * 64


def _box(**changes: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "engine": "vllm",
        "model": "qwen3.8-27b-w4a16",
        "served_name": "qwen3.8-27b",
        "api_key_sha256": KEY,
        "reverse_proxy_enabled": True,
        "reverse_proxy_tls": False,
    }
    return {**facts, **changes}


def _check(
    boxes: dict[str, dict[str, Any]], gateways: tuple[str, ...] = ("box1",), backends: tuple[str, ...] = ()
) -> list[str]:
    return group_problems(boxes, list(gateways), sorted(boxes), list(backends))


def test_without_a_gateway_nothing_is_checked() -> None:
    assert _check({"box1": _box(), "box2": _box(engine="ollama")}, gateways=()) == []


def test_a_group_that_agrees_passes() -> None:
    assert _check({"box1": _box(), "box2": _box(), "box3": _box()}) == []


def test_each_disagreement_names_the_box_and_the_knob() -> None:
    boxes = {
        "box1": _box(),
        "box2": _box(model="qwen3.6-35b-a3b-awq", served_name="qwen3.6-35b"),
        "box3": _box(engine="llamacpp", served_name="other"),
        "box4": _box(engine="ollama"),
    }
    problems = _check(boxes)
    assert problems == [
        "box2: model: resolves to qwen3.6-35b-a3b-awq here, box1 serves qwen3.8-27b-w4a16: the gateway sends any "
        "request to any box; set model to one preset for the whole group (model: auto picks by each box's GPUs)",
        "box2: vllm_served_model_name: is 'qwen3.6-35b', box1's is 'qwen3.8-27b': clients send one model name "
        "through the gateway",
        "box3: inference_engine: is llamacpp, box1's is vllm: every engine box behind the gateway serves with the "
        "same engine; set it for the whole group llmrig",
        "box4: inference_engine: is ollama, box1's is vllm: every engine box behind the gateway serves with the same "
        "engine; set it for the whole group llmrig",
    ]


def test_the_served_name_is_named_by_the_engines_own_knob() -> None:
    problems = _check({"box1": _box(engine="llamacpp"), "box2": _box(engine="llamacpp", served_name="x")})
    assert problems == [
        "box2: llamacpp_served_model_name: is 'x', box1's is 'qwen3.8-27b': clients send one model name through "
        "the gateway"
    ]


def test_an_empty_or_different_key_is_refused_without_showing_it() -> None:
    problems = _check({"box1": _box(), "box2": _box(api_key_sha256=""), "box3": _box(api_key_sha256="b" * 64)})
    assert problems == [
        "box2: llmrig_api_key: empty, so this box generates a key of its own, which the gateway's clients do not "
        "send; set one key for the whole group (vault_llmrig_api_key in group_vars)",
        "box3: llmrig_api_key: differs from box1's: the gateway passes the client's key on to whichever box it "
        "picks; set one key for the whole group",
    ]
    assert not any(KEY in line or "b" * 64 in line for line in problems)


def test_the_boxes_need_their_proxies_unless_the_backends_are_listed() -> None:
    boxes = {"box1": _box(reverse_proxy_enabled=False), "box2": _box(reverse_proxy_enabled=False)}
    assert _check(boxes) == [
        "box1: reverse_proxy_enabled: false, but the gateway's front is this box's API proxy; set it true on every "
        "box of the group",
        "box2: reverse_proxy_enabled: false, but the gateway reaches each box through its API proxy; set it true on "
        "every box of the group",
    ]
    # gateway_backends lists the boxes' own URLs: only the gateway's front still needs its proxy.
    assert _check(boxes, backends=("http://box2:8000",)) == [
        "box1: reverse_proxy_enabled: false, but the gateway's front is this box's API proxy; set it true on every "
        "box of the group"
    ]


def test_https_behind_a_gateway_is_refused_as_not_built() -> None:
    assert _check({"box1": _box(), "box2": _box(reverse_proxy_tls=True)}) == [
        "box2: reverse_proxy_tls: true, but HTTPS behind a gateway is not built yet: the router reaches each box's "
        "API proxy over plain HTTP, and the gateway's front serves plain HTTP; set it false on every box of the group"
    ]


def test_a_gateway_outside_the_engine_group_is_refused() -> None:
    assert _check({"box1": _box()}, gateways=("router1",)) == [
        "router1: llmrig_gateway: this host is not in the group llmrig; the gateway's front is served by an engine "
        "box's API proxy, so name a box of llmrig in llmrig_gateway (a gateway on a host of its own is not built yet)"
    ]


def test_facts_without_a_field_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="box2 lacks model"):
        _check({"box1": _box(), "box2": {"engine": "vllm", "served_name": "x"}})


def test_the_gateways_addresses_come_from_the_inventory_resolved_on_the_controller() -> None:
    """An address stays as it is, a name resolves (localhost here), an unknown name is refused by host."""
    assert gateway_sources({"box1": "192.168.1.50", "box0": "fd00::50"}) == ["fd00::50", "192.168.1.50"]
    assert set(gateway_sources({"box1": "localhost"})) <= {"127.0.0.1", "::1"}
    with pytest.raises(ConfigError, match=r"^box9: llmrig_gateway: cannot resolve 'no-such-host\.invalid'"):
        gateway_sources({"box9": "no-such-host.invalid"})
