"""bench.measure.telemetry.gpu: NVML telemetry, energy, and the memory-bandwidth bound of decode.

The real nvidia-ml-py runs against this machine's missing driver (the absent path); a protocol
fake of the pynvml module, named as such, plays two RTX 5060 Ti cards (the present path).
"""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench.codec import to_json
from bench.measure.run.options import RunOptions
from bench.measure.run.progress import print_summary
from bench.measure.run.results import Environment, RunResult
from bench.measure.telemetry.gpu import GpuReport, GpuSampler


def test_without_a_driver_the_sampler_says_so_once_and_carries_on() -> None:
    """The real NVML library on a machine without an NVIDIA driver: unavailable, no samples."""
    sampler = GpuSampler(interval_s=0.01)
    sampler.start()
    sampler.stop()
    assert sampler.unavailable is not None
    assert sampler.unavailable.startswith("no GPU telemetry: NVML unavailable")
    assert sampler.samples == []
    assert to_json(sampler.report(100, 10.0, 1e9)) == {"available": False, "reason": sampler.unavailable}


def _fake_pynvml() -> types.ModuleType:
    """PROTOCOL FAKE of the pynvml module: two RTX 5060 Ti 16 GB, energy rising 90 J per second."""
    fake = types.ModuleType("pynvml")
    started = time.monotonic()
    handles = {0: "gpu0", 1: "gpu1"}
    memory = types.SimpleNamespace(total=16 * 2**30, used=14 * 2**30)
    calls: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda index: handles[index],
        "nvmlDeviceGetName": lambda handle: "NVIDIA GeForce RTX 5060 Ti",
        "nvmlDeviceGetMemoryInfo": lambda handle: memory,
        "nvmlDeviceGetMemoryBusWidth": lambda handle: 128,
        "nvmlDeviceGetMaxClockInfo": lambda handle, kind: 14001,
        "nvmlDeviceGetUtilizationRates": lambda handle: types.SimpleNamespace(gpu=97, memory=80),
        "nvmlDeviceGetPowerUsage": lambda handle: 90_000,
        "nvmlDeviceGetClockInfo": lambda handle, kind: 2600 if kind == 1 else 14001,
        "nvmlDeviceGetTemperature": lambda handle, kind: 66,
        "nvmlDeviceGetTotalEnergyConsumption": lambda handle: int((time.monotonic() - started) * 90_000),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda handle: 0x4 if handle == "gpu1" else 0,
    }
    for name, function in calls.items():
        setattr(fake, name, function)
    fake.NVML_CLOCK_SM, fake.NVML_CLOCK_MEM, fake.NVML_TEMPERATURE_GPU = 1, 2, 0  # type: ignore[attr-defined]
    return fake


def _sampled(monkeypatch: pytest.MonkeyPatch, seconds: float) -> GpuSampler:
    """A sampler that ran for ``seconds`` against the pynvml protocol fake."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    sampler = GpuSampler(interval_s=0.02)
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    return sampler


def test_two_gpus_give_bandwidth_energy_and_the_decode_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """448 GB/s per card; 9.75 GB of weights per card bounds decode at 46 tok/s; joules add up."""
    report = _sampled(monkeypatch, 0.3).report(output_tokens=900, single_stream_tps=32.0, weight_bytes_per_gpu=9.75e9)
    assert isinstance(report, GpuReport)
    assert report.available is True
    first, second = report.gpus
    assert first.bandwidth_gbs == pytest.approx(448.032)
    assert first.decode_bound_tps == pytest.approx(448.032e9 / 9.75e9)
    assert report.decode_fraction_of_bound == pytest.approx(32.0 / (448.032e9 / 9.75e9))
    assert first.power_w_mean == 90.0
    assert first.memory_used_mib_max == 14 * 1024
    assert (first.throttle_reasons_seen, second.throttle_reasons_seen) == (0, 4)
    assert first.energy_j == pytest.approx(27.0, rel=0.35)  # ~0.3 s at 90 W
    assert report.tokens_per_joule == pytest.approx(900 / (first.energy_j + second.energy_j))
    assert first.samples >= 5


def test_the_report_prints_power_energy_and_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The end-of-run summary shows per-GPU power and throttling, tokens per joule and the bound."""
    sampler = _sampled(monkeypatch, 0.1)
    environment = Environment("0.1.0", "3.11", "client", "http://127.0.0.1:8000/v1", "m", "vllm", {}, None, None)
    result = RunResult(
        schema_version=1,
        run_id="r",
        tag="t",
        workload="single",
        started_at="2026-01-01T00:00:00+00:00",
        partial=False,
        options=RunOptions("single", 4, 64, 8, Path("results")),
        environment=environment,
        calibration=None,
        prompts=None,
        levels=[],
        gpu=sampler.report(output_tokens=900, single_stream_tps=32.0, weight_bytes_per_gpu=9.75e9),
        requests_events_gzip_b64="",
        trusted=True,
    )
    console = Console(record=True, width=200)
    print_summary(console, result)
    text = console.export_text()
    assert "GPU 1 NVIDIA GeForce RTX 5060 Ti: 90.0 W mean" in text
    assert "throttle reasons 0x4" in text
    assert "tokens per joule" in text
    assert "% of the memory-bandwidth bound (46.0 tok/s)" in text
