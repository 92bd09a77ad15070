"""``bench report``'s files: one self-contained HTML page (the jinja2 template in ``templates/``,
every plot embedded as a data URI, no other file needed to view it) and each plot as a PNG
beside it, all written through a temporary file and a rename."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from bench import __version__
from bench.documents import write_bytes_atomic
from bench.measure.report.data import Card
from bench.measure.report.plots import Plot


@dataclass(frozen=True, slots=True)
class Written:
    """What ``bench report`` wrote."""

    page: Path
    images: list[Path]


def _ms(value: float | None) -> str:
    return "not measured" if value is None else f"{value:,.0f} ms"


def card_rows(card: Card) -> list[tuple[str, str]]:
    """The card's lines, label and value, as the page and the terminal show them."""
    short = card.decode_short
    long = card.decode_long
    return [
        ("engine, preset", f"{card.engine}, {card.preset or 'unknown preset'}"),
        ("served by", card.group or "one box"),
        ("runs", str(card.runs)),
        ("start-up", card.startup),
        (
            "decode, one stream, short prompt",
            "not measured" if short is None else f"{short.y:,.1f} tok/s at {short.x:,.0f} tokens",
        ),
        (
            "decode, one stream, long prompt",
            "not measured (bench run context)" if long is None else f"{long.y:,.1f} tok/s at {long.x:,.0f} tokens",
        ),
        ("TTFT, one stream, short prompt", _ms(card.ttft_short_ms)),
        ("capacity", card.capacity),
        ("time to first answer, thinking on", _ms(card.ttfo_thinking_on_ms)),
        ("time to first answer, thinking off", _ms(card.ttfo_thinking_off_ms)),
        ("probes", card.probes),
        (
            "draft tokens accepted, per request",
            "not measured (vLLM with MTP and vllm_per_request_metrics)"
            if card.spec_per_request is None
            else f"p50 {card.spec_per_request[0]:.0%}, pooled {card.spec_per_request[1]:.0%}",
        ),
        (
            "tokens per joule",
            "not measured (no NVML)" if card.tokens_per_joule is None else f"{card.tokens_per_joule:,.2f}",
        ),
        (
            "energy per million tokens",
            "not measured (no NVML)"
            if card.kwh_per_million_tokens is None
            else f"{card.kwh_per_million_tokens:,.3f} kWh",
        ),
    ]


def _write(path: Path, data: bytes) -> None:
    write_bytes_atomic(path, data, mode=0o644)


def write(
    out: Path,
    *,
    cards: list[Card],
    plots: list[Plot],
    verdicts: dict[str, list[str]],
    runs: int,
    results_dir: Path,
    written: str,
) -> Written:
    """The page and the PNGs under ``out`` (created if missing); beside each plot, its ``verdicts``
    (:func:`bench.measure.report.verdicts.plot_verdicts`)."""
    out.mkdir(parents=True, exist_ok=True)
    environment = Environment(loader=PackageLoader("bench.measure.report", "templates"), autoescape=select_autoescape())
    page = environment.get_template("report.html.j2").render(
        tags=[card.tag for card in cards],
        written=written,
        version=__version__,
        runs=runs,
        results_dir=results_dir,
        cards=[{"tag": card.tag, "rows": card_rows(card)} for card in cards],
        plots=[
            {
                "name": p.name,
                "title": p.title,
                "data": base64.b64encode(p.png).decode(),
                "verdicts": verdicts.get(p.name, []),
            }
            for p in plots
        ],
    )
    images = []
    for plot in plots:
        image = out / f"{plot.name}.png"
        _write(image, plot.png)
        images.append(image)
    _write(out / "report.html", page.encode())
    return Written(out / "report.html", images)
