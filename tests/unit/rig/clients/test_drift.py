"""bench's check of written client configurations: each field the server no longer matches is
named with what the file holds and what the server needs; a file's own additions are left alone;
an unreadable file is stale as a whole."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.rig.clients import WRITERS, stale_fields, write_files
from tests.unit.rig.clients.cases import CASES

QWEN = CASES["qwen-vllm-https"]


def _written(folder: Path, *clients: str) -> None:
    write_files(folder, {name: text for client in clients for name, text in WRITERS[client](QWEN).items()})


def test_a_fresh_folder_has_nothing_stale(tmp_path: Path) -> None:
    _written(tmp_path, *WRITERS)
    checked, stale = stale_fields(tmp_path, QWEN)
    assert len(checked) == 9
    assert stale == []


def test_a_smaller_context_names_every_field_that_carries_it(tmp_path: Path) -> None:
    _written(tmp_path, "opencode", "continue", "hermes")
    _, stale = stale_fields(tmp_path, replace(QWEN, context=32768, max_output=8192), ("opencode", "continue", "hermes"))
    lines = [entry.line() for entry in stale]
    assert lines[:4] == [
        "opencode.json: provider.llmrig.models.qwen3.8-27b.limit.context is 65536, the server now needs 32768",
        "opencode.json: provider.llmrig.models.qwen3.8-27b.limit.output is 16384, the server now needs 8192",
        "continue/config.yaml: models.0.defaultCompletionOptions.contextLength is 65536, the server now needs 32768",
        "continue/config.yaml: models.0.defaultCompletionOptions.maxTokens is 16384, the server now needs 8192",
    ]
    assert {(entry.file, entry.field) for entry in stale[4:]} == {
        (config, field)
        for config in ("hermes/config.yaml", "hermes/profile/config.yaml")
        for field in (
            "model.context_length",
            "model.max_tokens",
            "custom_providers.0.models.qwen3.8-27b.context_length",
        )
    }


def test_another_model_and_url_are_named(tmp_path: Path) -> None:
    _written(tmp_path, "opencode", "openai")
    moved = replace(QWEN, served_name="qwen3.6-35b-a3b", base_url="https://llm2.lan:8443/v1")
    _, stale = stale_fields(tmp_path, moved, ("opencode", "openai"))
    lines = {entry.line() for entry in stale}
    assert "opencode.json: model is 'llmrig/qwen3.8-27b', the server now needs 'llmrig/qwen3.6-35b-a3b'" in lines
    assert (
        "opencode.json: provider.llmrig.options.baseURL is 'https://llm.lan:8443/v1', "
        "the server now needs 'https://llm2.lan:8443/v1'"
    ) in lines
    assert (
        "opencode.json: provider.llmrig.models.qwen3.6-35b-a3b.limit.context is (missing), the server now needs 65536"
        in lines
    )
    assert (
        "openai.env: OPENAI_BASE_URL is 'https://llm.lan:8443/v1', the server now needs 'https://llm2.lan:8443/v1'"
        in lines
    )


def test_a_files_own_additions_are_left_alone(tmp_path: Path) -> None:
    _written(tmp_path, "continue")
    path = tmp_path / "continue" / "config.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "rules:\n- Be brief.\n", encoding="utf-8")
    assert stale_fields(tmp_path, QWEN, ("continue",)) == (["continue/config.yaml"], [])


def test_an_unreadable_file_is_stale_as_a_whole(tmp_path: Path) -> None:
    _written(tmp_path, "opencode")
    (tmp_path / "opencode.json").write_text("{ not json", encoding="utf-8")
    _, stale = stale_fields(tmp_path, QWEN, ("opencode",))
    assert [entry.line() for entry in stale] == [
        "opencode.json: (the file) is unreadable (JSONDecodeError), the server now needs a file bench can read"
    ]


def test_only_the_files_present_are_checked(tmp_path: Path) -> None:
    assert stale_fields(tmp_path, QWEN) == ([], [])
