"""The grafana role's files, rendered by real Ansible from its own templates and vars: the data
source provisioning names the monitoring role's Prometheus under the uid every dashboard's
`datasource` variable starts on, the dashboards' file provider reads the folder the role copies
them to, and the drop-in binds Grafana where its knobs say with the admin password from a file.
Grafana itself cannot be installed here (its apt repository is not reachable): the box runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dashboards import DATASOURCE_UID, load_all
from tests.helpers import GROUP_VARS, REPO, ansible_render, run_playbook

pytestmark = pytest.mark.ansible

ROLE = REPO / "roles" / "grafana"
KNOBS = yaml.safe_load((GROUP_VARS / "grafana.yml").read_text(encoding="utf-8"))


def _render(template: str, **knobs: Any) -> str:
    """roles/grafana/templates/``template`` templated by ansible with the role's vars and the knobs."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    variables: dict[str, Any] = {
        **role_vars,
        **KNOBS,
        "llmrig_config_dir": "/etc/llmrig",
        "monitoring_prometheus_host": "127.0.0.1",
        "monitoring_prometheus_port": 9090,
        **knobs,
        "ansible_managed": "Ansible managed",  # the template module's default; debug has none
        "__template": (ROLE / "templates" / template).read_text(encoding="utf-8"),
    }
    rendered = ansible_render("{{ __template }}", variables)
    assert isinstance(rendered, str)
    assert rendered.startswith("#\n# Ansible managed\n#\n"), rendered[:200]
    return rendered


def test_every_template_starts_with_the_managed_header() -> None:
    templates = sorted(ROLE.glob("templates/*.j2"))
    assert [path.name for path in templates] == ["dashboards.yaml.j2", "datasource.yaml.j2", "grafana-server.conf.j2"]
    for path in templates:
        assert path.read_text(encoding="utf-8").startswith("{{ ansible_managed | comment }}\n"), path.name


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:9090"),
        ("0.0.0.0", "http://127.0.0.1:9090"),  # every interface: dialled on loopback
        ("::", "http://127.0.0.1:9090"),
        ("::1", "http://[::1]:9090"),
        ("192.168.1.50", "http://192.168.1.50:9090"),
    ],
)
def test_the_data_source_is_the_monitoring_prometheus_under_the_dashboards_uid(host: str, url: str) -> None:
    """One Prometheus data source, dialled at the monitoring knobs' address, whose uid is the one
    each dashboard's datasource variable starts on."""
    document = yaml.safe_load(_render("datasource.yaml.j2", monitoring_prometheus_host=host))
    assert document["apiVersion"] == 1
    (source,) = document["datasources"]
    assert source == {
        "name": "Prometheus",
        "uid": DATASOURCE_UID,
        "type": "prometheus",
        "access": "proxy",
        "url": url,
        "isDefault": True,
        "editable": False,
    }
    for name, dashboard in load_all().items():
        (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
        assert variable["current"]["value"] == source["uid"], name


def test_the_file_provider_reads_the_folder_the_dashboards_are_copied_to() -> None:
    document = yaml.safe_load(_render("dashboards.yaml.j2"))
    (provider,) = document["providers"]
    assert provider["type"] == "file"
    folder = ansible_render("{{ _grafana_dashboards_dir }}", yaml.safe_load((ROLE / "vars" / "main.yml").read_text()))
    assert provider["options"]["path"] == folder == "/var/lib/grafana/dashboards/llmrig"
    tasks = yaml.safe_load((ROLE / "tasks" / "configure.yml").read_text(encoding="utf-8"))
    (copy,) = [task for task in tasks if "dashboards/*.json" in str(task.get("loop", ""))]
    assert copy["ansible.builtin.copy"]["dest"].startswith("{{ _grafana_dashboards_dir }}/")


def test_the_drop_in_binds_the_knobs_address_and_reads_the_password_from_a_file() -> None:
    lines = _render("grafana-server.conf.j2").splitlines()
    assert lines[3:5] == [
        "# llmrig's settings for the grafana package's unit, as Grafana's GF_<SECTION>_<KEY> environment.",
        "[Service]",
    ]
    settings = dict(
        line.removeprefix("Environment=").split("=", 1) for line in lines if line.startswith("Environment=")
    )
    assert settings["GF_SERVER_HTTP_ADDR"] == "127.0.0.1"
    assert settings["GF_SERVER_HTTP_PORT"] == "3000"
    assert settings["GF_SECURITY_ADMIN_PASSWORD__FILE"] == "/etc/llmrig/grafana_admin_password"
    assert "GF_SECURITY_ADMIN_PASSWORD" not in settings  # the value itself never in a unit
    assert settings["GF_ANALYTICS_REPORTING_ENABLED"] == settings["GF_USERS_ALLOW_SIGN_UP"] == "false"
    other = dict(
        line.removeprefix("Environment=").split("=", 1)
        for line in _render("grafana-server.conf.j2", grafana_host="::", grafana_port=3300).splitlines()
        if line.startswith("Environment=")
    )
    assert (other["GF_SERVER_HTTP_ADDR"], other["GF_SERVER_HTTP_PORT"]) == ("::", "3300")


PROMETHEUS = {"monitoring_prometheus_host": "127.0.0.1", "monitoring_prometheus_port": 9090}


def test_disabled_changes_nothing_where_grafana_was_never_installed(tmp_path: Path) -> None:
    """grafana_enabled false (the default), for real: the role finds no unit to stop and changes nothing."""
    run = run_playbook("tests/ansible/grafana_role.yml", PROMETHEUS, check=False, tmp_path=tmp_path)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert run.changed == 0
    assert "grafana : disabled | Read whether Grafana's unit exists" in run.task_names
    assert not any("Stop and disable" in name for name in run.task_names)


def test_check_mode_on_a_host_without_grafana(tmp_path: Path) -> None:
    """grafana_enabled true in check mode (the install step left out: it asks apt.grafana.com,
    which this test's network namespace cannot reach): every expression of the configure and
    run steps evaluates, the password would be generated, and nothing is written."""
    run = run_playbook(
        "tests/ansible/grafana_role.yml",
        {**PROMETHEUS, "grafana_enabled": True},
        flags=("--skip-tags", "grafana_install"),
        tmp_path=tmp_path,
    )
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert any(name.startswith("grafana : configure | Generate Grafana's admin password") for name in run.changed_tasks)
    assert (
        "grafana : configure | Create the drop-in's, the provisioning and the dashboards' directories"
        in run.changed_tasks
    )
    assert not Path("/etc/systemd/system/grafana-server.service.d/llmrig.conf").exists()
