"""The gateway's part of deployment.json (docs/gateway.md): on a host of the inventory group
``llmrig_gateway`` the engine role records, beside the host's own engine, the front that clients
reach the whole group through and every engine box behind it with its own facts (the box's
inventory name, its API proxy's URL, its engine, preset, served name, device and GPUs), as the
boxes' own runs published them. ``bench`` then sends requests to the front (:attr:`Gateway.base_url`)
and the capability card names the group."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backend:
    """One engine box behind the gateway, as its own run described it."""

    host: str  # its inventory name
    base_url: str  # where the router reaches it: its API proxy's OpenAI base URL
    engine: str
    preset: str
    served_model_name: str
    device: str
    gpus: list[str]  # the GPUs' names, as preflight found them ([] on a CPU host)


@dataclass(frozen=True, slots=True)
class Gateway:
    """The front that clients reach the group through, the router behind it, and the boxes."""

    base_url: str  # clients: the front's OpenAI base URL on the LAN (with the API key)
    metrics_url: str  # clients: the router's Prometheus metrics through the front (with the key)
    local_base_url: str  # the host itself: the router on loopback
    policy: str  # gateway_policy
    router_version: str  # gateway_router_version
    out_of_rotation_s: int  # the longest a box that stops answering stays in rotation
    backends: list[Backend]

    def describe(self) -> str:
        """One line: how many boxes, the policy, and each box's engine and GPUs."""
        boxes = "; ".join(f"{box.host} ({box.engine} on {', '.join(box.gpus) or box.device})" for box in self.backends)
        return f"gateway over {len(self.backends)} boxes by {self.policy}: {boxes}"
