"""SIGTERM and SIGHUP stop bench the way Ctrl-C does.

``timeout``, systemd, a container stop and a cancelled CI job send SIGTERM; a closed terminal
sends SIGHUP. Python's default for both is to die at once: no table, no partial file, no line.
Inside :func:`stop_like_ctrl_c` each of them is handed to whatever handles SIGINT at that moment
(asyncio's handler while a run's event loop runs, which cancels the run so that it files what it
measured; else Python's, which raises :class:`KeyboardInterrupt`), and remembered, so that the
partial file says which signal stopped the run and the exit status is 128 + its number (SIGTERM
143, SIGHUP 129; Ctrl-C 130).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

FORWARDED = (signal.SIGTERM, signal.SIGHUP)
INTERRUPTED = 130  # what a command returns when stopped; the CLI exits with exit_status() instead
_received: list[int] = []


def received() -> int:
    """The signal that stopped bench: the last one forwarded, else SIGINT."""
    return _received[-1] if _received else int(signal.SIGINT)


def reason() -> str:
    """How bench was stopped, in words: ``interrupted`` (Ctrl-C) or ``stopped by SIGTERM``."""
    signum = received()
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


def stopped() -> bool:
    """Whether SIGTERM or SIGHUP has come (Ctrl-C is not counted: asyncio handles it itself)."""
    return bool(_received)


def exit_status() -> int:
    """The exit status of a stopped bench: 128 + the signal's number."""
    return 128 + received()


def _forward(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:  # SIGINT ignored (a background job of a script) or left to the system: stop all the same
        raise KeyboardInterrupt


@contextmanager
def stop_like_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP handled as SIGINT while in the block (from the main thread only, where
    Python runs signal handlers; elsewhere the block changes nothing), unless bench started with
    them ignored (``nohup`` ignores SIGHUP)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A signal ignored when bench started stays ignored: `nohup bench run ...` must outlive its terminal.
    kept = [signum for signum in FORWARDED if signal.getsignal(signum) is not signal.SIG_IGN]
    previous = {signum: signal.signal(signum, _forward) for signum in kept}
    _received.clear()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received.clear()
