"""llmrig-gpu-exporter (roles/monitoring/files): NVML readings as Prometheus metrics.

The real nvidia-ml-py runs against this machine's missing driver (the program must refuse to
start, saying why); a protocol FAKE of the pynvml module, named as such, plays two RTX 5060 Ti
cards. The output is read back with prometheus_client's text parser, over real HTTP.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import REPO

SCRIPT = REPO / "roles" / "monitoring" / "files" / "llmrig-gpu-exporter"


def load_script(path: Path, name: str) -> types.ModuleType:
    """Import a Python script without a .py suffix (and without leaving a __pycache__ next to it)."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


EXPORTER = load_script(SCRIPT, "llmrig_gpu_exporter")
NAME = "NVIDIA GeForce RTX 5060 Ti"
UUIDS = ("GPU-0b5e3c41-0000-4000-8000-00000000000a", "GPU-0b5e3c41-0000-4000-8000-00000000000b")
GPU_METRICS = {
    "llmrig_gpu_temperature_celsius",
    "llmrig_gpu_power_watts",
    "llmrig_gpu_power_limit_watts",
    "llmrig_gpu_memory_used_bytes",
    "llmrig_gpu_memory_total_bytes",
    "llmrig_gpu_utilization_ratio",
    "llmrig_gpu_throttled",
}


class FakeNVMLError(Exception):
    """FAKE of pynvml.NVMLError."""


class FakeNVMLNotSupported(FakeNVMLError):
    """FAKE of pynvml.NVMLError_NotSupported."""


def fake_pynvml(*, reasons: tuple[int, int] = (0x44, 0), new_reasons_call: bool = True) -> types.ModuleType:
    """PROTOCOL FAKE of the pynvml module: two RTX 5060 Ti 16 GB. GPU 0 at 90 W of 180 W, 66 °C,
    97 % busy, 14 GiB used; GPU 1 idle, 34 °C, its enforced power limit "Not Supported"."""
    fake = types.ModuleType("pynvml")
    gpus: dict[str, dict[str, Any]] = {
        "gpu0": {"uuid": UUIDS[0], "temp": 66, "mw": 90_123, "limit": 180_000, "used": 14 * 2**30, "util": 97},
        "gpu1": {"uuid": UUIDS[1], "temp": 34, "mw": 11_000, "limit": None, "used": 2**20, "util": 0},
    }

    def limit(handle: str) -> int:
        value = gpus[handle]["limit"]
        if value is None:
            raise FakeNVMLNotSupported("Not Supported")
        return int(value)

    calls: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda index: f"gpu{index}",
        "nvmlDeviceGetName": lambda handle: NAME,
        "nvmlDeviceGetUUID": lambda handle: gpus[handle]["uuid"].encode(),  # older bindings return bytes
        "nvmlDeviceGetTemperature": lambda handle, sensor: gpus[handle]["temp"] if sensor == 0 else -1,
        "nvmlDeviceGetPowerUsage": lambda handle: gpus[handle]["mw"],
        "nvmlDeviceGetEnforcedPowerLimit": limit,
        "nvmlDeviceGetMemoryInfo": lambda handle: types.SimpleNamespace(total=16 * 2**30, used=gpus[handle]["used"]),
        "nvmlDeviceGetUtilizationRates": lambda handle: types.SimpleNamespace(gpu=gpus[handle]["util"], memory=3),
    }
    name = "nvmlDeviceGetCurrentClocksEventReasons" if new_reasons_call else "nvmlDeviceGetCurrentClocksThrottleReasons"
    calls[name] = lambda handle: reasons[int(handle[-1])]
    for key, function in calls.items():
        setattr(fake, key, function)
    fake.NVMLError, fake.NVMLError_NotSupported = FakeNVMLError, FakeNVMLNotSupported  # type: ignore[attr-defined]
    fake.gpus = gpus  # type: ignore[attr-defined]
    return fake


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus' own parser: (name, sorted labels) to value; every family a gauge with help."""
    values = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        assert family.documentation, family.name
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def labels(gpu: int, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"gpu": str(gpu), "uuid": UUIDS[gpu], "name": NAME, **extra}.items()))


def test_two_gpus_in_prometheus_text_format() -> None:
    values = parse(EXPORTER.render(EXPORTER.read_samples(fake_pynvml())))
    assert values[("llmrig_gpu_temperature_celsius", labels(0))] == 66
    assert values[("llmrig_gpu_temperature_celsius", labels(1))] == 34
    assert values[("llmrig_gpu_power_watts", labels(0))] == pytest.approx(90.123)  # from milliwatts
    assert values[("llmrig_gpu_power_watts", labels(1))] == 11
    assert values[("llmrig_gpu_power_limit_watts", labels(0))] == 180
    assert ("llmrig_gpu_power_limit_watts", labels(1)) not in values  # "Not Supported": left out
    assert values[("llmrig_gpu_memory_used_bytes", labels(0))] == 14 * 2**30
    assert values[("llmrig_gpu_memory_total_bytes", labels(1))] == 16 * 2**30
    assert values[("llmrig_gpu_utilization_ratio", labels(0))] == pytest.approx(0.97)
    assert values[("llmrig_gpu_utilization_ratio", labels(1))] == 0
    assert values[("llmrig_gpu_exporter_up", ())] == 1
    assert {name for name, _ in values} == {*GPU_METRICS, "llmrig_gpu_exporter_up"}


def throttled(text: str, gpu: int) -> dict[str, float]:
    return {
        dict(key)["reason"]: value
        for (name, key), value in parse(text).items()
        if name == "llmrig_gpu_throttled" and dict(key)["gpu"] == str(gpu)
    }


@pytest.mark.parametrize("new_reasons_call", [True, False], ids=["ClocksEventReasons", "ClocksThrottleReasons"])
def test_throttle_bits_are_decoded_per_reason(new_reasons_call: bool) -> None:
    """0x44 = SwPowerCap (0x04) | HwThermalSlowdown (0x40); 0xA9 = GpuIdle (0x01, not a
    slowdown: not reported) | HwSlowdown | SwThermalSlowdown | HwPowerBrakeSlowdown."""
    nvml = fake_pynvml(reasons=(0x44, 0xA9), new_reasons_call=new_reasons_call)
    text = EXPORTER.render(EXPORTER.read_samples(nvml))
    assert throttled(text, 0) == {
        "hw_slowdown": 0,
        "hw_thermal_slowdown": 1,
        "hw_power_brake_slowdown": 0,
        "sw_thermal_slowdown": 0,
        "sw_power_cap": 1,
    }
    assert throttled(text, 1) == {
        "hw_slowdown": 1,
        "hw_thermal_slowdown": 0,
        "hw_power_brake_slowdown": 1,
        "sw_thermal_slowdown": 1,
        "sw_power_cap": 0,
    }


def test_label_values_are_escaped() -> None:
    sample = EXPORTER.Sample("llmrig_gpu_temperature_celsius", (("gpu", "0"), ("name", 'a "b"\\c\nd')), 40.5)
    values = parse(EXPORTER.render([sample]))
    assert values[("llmrig_gpu_temperature_celsius", (("gpu", "0"), ("name", 'a "b"\\c\nd')))] == 40.5


@pytest.fixture
def scraped(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, types.ModuleType]]:
    """The exporter serving the fake over real HTTP on a free loopback port: its base URL and the fake."""
    nvml = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    server = EXPORTER.serve(EXPORTER.start_nvml(), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", nvml
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_a_scrape_over_http_reads_nvml_each_time(scraped: tuple[str, types.ModuleType]) -> None:
    url, nvml = scraped
    status, content_type, body = get(f"{url}/metrics")
    assert (status, content_type) == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert parse(body)[("llmrig_gpu_temperature_celsius", labels(0))] == 66
    nvml.gpus["gpu0"]["temp"] = 91
    assert parse(get(f"{url}/metrics")[2])[("llmrig_gpu_temperature_celsius", labels(0))] == 91
    assert get(f"{url}/other")[0] == 404


def test_an_nvml_error_in_a_scrape_is_http_500_and_the_next_scrape_works(
    scraped: tuple[str, types.ModuleType], capfd: pytest.CaptureFixture[str]
) -> None:
    url, nvml = scraped
    healthy = nvml.nvmlDeviceGetTemperature

    def lost(handle: str, sensor: int) -> int:
        raise FakeNVMLError("GPU is lost")

    nvml.nvmlDeviceGetTemperature = lost  # type: ignore[attr-defined]
    status, _, body = get(f"{url}/metrics")
    assert (status, body) == (500, "reading NVML failed: FakeNVMLError: GPU is lost\n")
    assert "<3>llmrig-gpu-exporter: reading NVML failed: FakeNVMLError: GPU is lost\n" in capfd.readouterr().err
    nvml.nvmlDeviceGetTemperature = healthy  # type: ignore[attr-defined]
    assert get(f"{url}/metrics")[0] == 200


def test_without_a_driver_the_real_program_exits_1_saying_why() -> None:
    """The real nvidia-ml-py on this machine, which has no NVIDIA driver: NVML cannot start."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--port", "0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("<3>llmrig-gpu-exporter: cannot initialise NVML (NVMLError_LibraryNotFound: ")
    assert done.stderr.endswith("is the NVIDIA driver loaded (nvidia-smi)?\n")


def test_an_unusable_port_exits_1_saying_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    with EXPORTER.serve(EXPORTER.start_nvml(), "127.0.0.1", 0) as taken:
        port = taken.server_address[1]
        assert EXPORTER.main(["--listen", "127.0.0.1", "--port", str(port)]) == 1
    assert capsys.readouterr().err.startswith(f"<3>llmrig-gpu-exporter: cannot listen on 127.0.0.1:{port} (")


def test_the_fake_speaks_the_real_bindings_protocol() -> None:
    """Every call the fake answers exists in the installed nvidia-ml-py with as many required parameters,
    its error classes nest the same way, and the exporter's constants are NVML's."""
    import inspect  # noqa: PLC0415 (the real binding, imported here only)

    import pynvml  # noqa: PLC0415

    fake = fake_pynvml()
    for name in dir(fake):
        if name.startswith("nvml"):
            real = inspect.signature(getattr(pynvml, name)).parameters.values()
            required = [parameter for parameter in real if parameter.default is inspect.Parameter.empty]
            assert len(required) == len(inspect.signature(getattr(fake, name)).parameters), name
    assert issubclass(pynvml.NVMLError_NotSupported, pynvml.NVMLError)
    assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons  # the fallback's name exists too
    assert pynvml.NVML_TEMPERATURE_GPU == EXPORTER.NVML_TEMPERATURE_GPU
    bits = {
        "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
        "hw_thermal_slowdown": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
        "hw_power_brake_slowdown": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
        "sw_thermal_slowdown": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
        "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
    }
    assert dict(EXPORTER.REASONS) == bits
