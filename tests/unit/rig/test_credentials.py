"""bench.rig.credentials: pip's configuration file, a URL's credentials split off, and redaction."""

from __future__ import annotations

import configparser

import pytest

from bench.errors import ConfigError
from bench.rig.credentials import pip_config, redact_url, url_parts


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pa%40ss@pypi.example/simple", "https://***@pypi.example/simple"),
        ("https://token@pypi.example:8443/simple", "https://***@pypi.example:8443/simple"),
        ("https://pypi.example/simple", "https://pypi.example/simple"),
        ("/srv/wheelhouse", "/srv/wheelhouse"),
    ],
)
def test_a_url_is_recorded_without_its_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_the_credentials_are_split_off_and_decoded() -> None:
    assert url_parts("https://me:pa%40ss@mirror.example/o.tar.zst") == {
        "url": "https://mirror.example/o.tar.zst",
        "username": "me",
        "password": "pa@ss",
    }
    assert url_parts("https://mirror.example/o.tar.zst") == {
        "url": "https://mirror.example/o.tar.zst",
        "username": "",
        "password": "",
    }


def test_pip_reads_every_option_from_the_file() -> None:
    text = pip_config(
        False, "https://u:p@idx.example/simple", ["https://a.example/simple", "https://b.example/simple"], ["/wh"]
    )
    parser = configparser.RawConfigParser()
    parser.read_string(text)
    section = parser["global"]
    assert section["no-index"] == "false"
    assert section["index-url"] == "https://u:p@idx.example/simple"
    assert section["extra-index-url"].split() == ["https://a.example/simple", "https://b.example/simple"]
    assert section["find-links"].split() == ["/wh"]


def test_unset_options_are_left_to_pips_defaults() -> None:
    assert pip_config(True, "", [], ["/wheelhouse"]) == "[global]\nno-index = true\nfind-links =\n    /wheelhouse\n"


def test_a_line_break_in_a_url_is_refused_without_its_credentials() -> None:
    with pytest.raises(ConfigError, match=r"^llmrig_pip_extra_index_urls: 'https://\*\*\*@x\.example/") as caught:
        pip_config(False, "", ["https://u:secret@x.example/s\nx"], [])
    assert "secret" not in str(caught.value)
