"""GPU telemetry through NVML (``nvidia-ml-py``), sampled in a background thread during a run.

Per GPU: memory used, utilization, power, SM and memory clocks, temperature, clock-event
(throttle) reasons, and the energy counter, whose difference over the run gives joules and so
tokens per joule. From NVML's memory bus width and maximum memory clock comes the memory
bandwidth; with the bytes each GPU streams per decoded token (its share of the weights) that
gives the single-stream decode ceiling, and a run's decode speed as a fraction of it.

When NVML is absent (no driver, no GPU, bench on another machine than the server) the sampler
says so once in ``unavailable`` and records nothing; a run goes on without telemetry.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

# NVML reports the GDDR memory clock at half the per-pin data rate (14001 MHz for 28 Gbps).
DATA_RATE_PER_CLOCK = 2


@dataclass(slots=True)
class GpuSample:
    """One reading of one GPU."""

    t_ns: int
    index: int
    memory_used_mib: float
    utilization_pct: float
    power_w: float
    sm_clock_mhz: float
    memory_clock_mhz: float
    temperature_c: float
    energy_mj: float | None
    throttle_reasons: int


@dataclass(slots=True)
class GpuInfo:
    """Static facts of one GPU."""

    index: int
    name: str
    memory_total_mib: float
    bus_width_bits: int | None
    max_memory_clock_mhz: float | None

    @property
    def bandwidth_gbs(self) -> float | None:
        """Theoretical memory bandwidth in GB/s (10^9 bytes per second)."""
        if not self.bus_width_bits or not self.max_memory_clock_mhz:
            return None
        return self.max_memory_clock_mhz * DATA_RATE_PER_CLOCK * self.bus_width_bits / 8 / 1000


@dataclass(frozen=True, slots=True)
class GpuCard:
    """One GPU over the whole run (the entries of ``gpu.gpus``)."""

    index: int
    name: str
    bandwidth_gbs: float | None
    decode_bound_tps: float | None  # bandwidth over the bytes this GPU streams per token
    memory_used_mib_max: float
    utilization_pct_mean: float
    power_w_mean: float
    power_w_max: float
    sm_clock_mhz_min: float
    sm_clock_mhz_mean: float
    memory_clock_mhz_mean: float
    temperature_c_max: float
    throttle_reasons_seen: int  # NVML clock-event reason bits seen in any sample
    energy_j: float | None
    samples: int


@dataclass(frozen=True, slots=True)
class GpuReport:
    """NVML telemetry of a run: every GPU, energy and tokens per joule, decode against the bandwidth bound."""

    gpus: list[GpuCard]
    energy_j: float | None
    tokens_per_joule: float | None
    decode_bound_tps: float | None
    decode_fraction_of_bound: float | None
    available: Literal[True] = True


@dataclass(frozen=True, slots=True)
class GpuAbsent:
    """No telemetry, and why (no driver, no GPU, bench on another machine), said once."""

    reason: str
    available: Literal[False] = False


@dataclass(slots=True)
class GpuSampler:
    """Samples every GPU every ``interval_s`` between :meth:`start` and :meth:`stop`."""

    interval_s: float = 0.5
    gpus: list[GpuInfo] = field(default_factory=list)
    samples: list[GpuSample] = field(default_factory=list)
    unavailable: str | None = None
    _nvml: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            import pynvml  # noqa: PLC0415 (optional at run time: absent drivers are normal)

            pynvml.nvmlInit()
        except Exception as exc:  # NVML raises many library- and driver-specific errors
            self.unavailable = f"no GPU telemetry: NVML unavailable ({type(exc).__name__}: {exc})"
            return
        self._nvml = pynvml
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.gpus.append(
                GpuInfo(
                    index=index,
                    name=str(pynvml.nvmlDeviceGetName(handle)),
                    memory_total_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20,
                    bus_width_bits=_maybe(pynvml.nvmlDeviceGetMemoryBusWidth, handle),
                    max_memory_clock_mhz=_maybe(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM),
                )
            )
        if not self.gpus:
            self.unavailable = "no GPU telemetry: NVML found no GPU"
            return
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        nvml = self._nvml
        now = time.perf_counter_ns()
        for gpu in self.gpus:
            handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
            self.samples.append(
                GpuSample(
                    t_ns=now,
                    index=gpu.index,
                    memory_used_mib=nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
                    utilization_pct=float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                    power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                    sm_clock_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                    memory_clock_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                    temperature_c=float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
                    energy_mj=_maybe(nvml.nvmlDeviceGetTotalEnergyConsumption, handle),
                    throttle_reasons=int(_maybe(nvml.nvmlDeviceGetCurrentClocksEventReasons, handle) or 0),
                )
            )

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._sample()
        if self._nvml is not None:
            self._nvml.nvmlShutdown()

    def report(
        self, output_tokens: float, single_stream_tps: float | None, weight_bytes_per_gpu: float | None
    ) -> GpuReport | GpuAbsent:
        """Per-GPU statistics, energy and tokens per joule, and decode speed against the bandwidth bound."""
        if self.unavailable is not None:
            return GpuAbsent(self.unavailable)
        gpus: list[GpuCard] = []
        bounds: list[float] = []
        energy_j = 0.0
        for gpu in self.gpus:
            mine = [sample for sample in self.samples if sample.index == gpu.index]
            energies = [sample.energy_mj for sample in mine if sample.energy_mj is not None]
            joules = (energies[-1] - energies[0]) / 1000.0 if len(energies) >= 2 else None
            energy_j += joules or 0.0
            bound = None
            if gpu.bandwidth_gbs and weight_bytes_per_gpu:
                bound = gpu.bandwidth_gbs * 1e9 / weight_bytes_per_gpu
                bounds.append(bound)
            gpus.append(
                GpuCard(
                    index=gpu.index,
                    name=gpu.name,
                    bandwidth_gbs=gpu.bandwidth_gbs,
                    decode_bound_tps=bound,
                    memory_used_mib_max=max(s.memory_used_mib for s in mine),
                    utilization_pct_mean=_mean([s.utilization_pct for s in mine]),
                    power_w_mean=_mean([s.power_w for s in mine]),
                    power_w_max=max(s.power_w for s in mine),
                    sm_clock_mhz_min=min(s.sm_clock_mhz for s in mine),
                    sm_clock_mhz_mean=_mean([s.sm_clock_mhz for s in mine]),
                    memory_clock_mhz_mean=_mean([s.memory_clock_mhz for s in mine]),
                    temperature_c_max=max(s.temperature_c for s in mine),
                    throttle_reasons_seen=_bits(mine),
                    energy_j=joules,
                    samples=len(mine),
                )
            )
        bound_tps = min(bounds) if bounds else None
        return GpuReport(
            gpus=gpus,
            energy_j=energy_j or None,
            tokens_per_joule=output_tokens / energy_j if energy_j else None,
            decode_bound_tps=bound_tps,
            decode_fraction_of_bound=single_stream_tps / bound_tps if bound_tps and single_stream_tps else None,
        )


def _maybe(function: Any, *args: Any) -> Any:
    """``function(*args)``, or None when this GPU or driver does not support the query."""
    try:
        return function(*args)
    except Exception:  # NVMLError_NotSupported and friends
        return None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _bits(samples: list[GpuSample]) -> int:
    seen = 0
    for sample in samples:
        seen |= sample.throttle_reasons
    return seen
