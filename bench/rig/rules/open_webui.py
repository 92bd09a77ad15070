"""Rules on Open WebUI's knobs, checked only while ``open_webui_enabled``: its public URL, the
pinned release, the admin's e-mail, the parameters added to every chat (each check in
:mod:`bench.rig.open_webui_inputs`, which the role's environment reads too), and its port on the
host."""

from __future__ import annotations

from bench.rig.open_webui_inputs import email_problem, params_problem, url_problem, version_problem
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err
from bench.rig.rules.resources import port_holder

# The unit that holds Open WebUI's port on a re-run (roles/open_webui/vars/main.yml).
OPEN_WEBUI_UNIT = "open-webui.service"


def rule_open_webui(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Open WebUI's URL, release, admin e-mail and model parameters are what it can use."""
    if not as_bool(knobs, "open_webui_enabled"):
        return []
    problems: list[Problem] = []
    url = as_str(knobs, "open_webui_url").rstrip("/")
    if problem := url_problem(url):
        problems += err("open_webui_url", f"{url!r} {problem}")
    version = knobs.get("open_webui_version")
    if problem := version_problem(version):
        problems += err("open_webui_version", f"{version!r} {problem}")
    email = knobs.get("open_webui_admin_email")
    if problem := email_problem(email):
        problems += err("open_webui_admin_email", f"{email!r} {problem}")
    if problem := params_problem(knobs.get("open_webui_default_model_params")):
        problems += err("open_webui_default_model_params", problem)
    return problems


def rule_open_webui_port_free(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Open WebUI's port is free on its address, or held by Open WebUI itself (a re-run)."""
    if not as_bool(knobs, "open_webui_enabled"):
        return []
    port = as_int(knobs, "open_webui_port")
    holder = port_holder(host, port, as_str(knobs, "open_webui_host"), {OPEN_WEBUI_UNIT})
    return err("open_webui_port", holder) if holder else []
