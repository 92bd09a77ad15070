"""Open WebUI in a real browser: Debian's Chromium driven by Playwright (``playwright`` from PyPI,
``executable_path`` pointed at the system browser; Playwright's own browser download is not
used). Signs in, picks the model, sends one message, waits for the answer and saves a screenshot;
or signs in and finds a chat by its title in the sidebar (a restored box).

``python -m tests.browser URL EMAIL PASSWORD_FILE MODEL SCREENSHOT`` does the same for
``scripts/demo``; the password is read from its file, never passed on a command line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Browser, Page, Playwright, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package `chromium` (scripts/testrig browser)
# Headless, and none of Chromium's own network traffic: this machine's network is closed, and a
# test must see only the page's requests.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 120_000
WELCOME_MS = 10_000  # how long the release notes may take to show after the chat page


@dataclass(frozen=True)
class Site:
    """How the browser reaches an HTTPS site by its name: the CA root it trusts (added to the NSS
    database of a temporary home, where Chromium on Linux reads the certificates a user trusts;
    Playwright's ignore-HTTPS-errors is not used) and the address the name resolves to."""

    name: str
    address: str
    ca_file: Path


@contextmanager
def _launched(playwright: Playwright, site: Site | None) -> Iterator[Browser]:
    with tempfile.TemporaryDirectory(prefix="llmrig-browser-") as home:
        args = list(CHROMIUM_ARGS)
        env: dict[str, str | float | bool] = dict(os.environ)
        if site is not None:
            nssdb = Path(home) / ".pki" / "nssdb"
            nssdb.mkdir(parents=True)
            certutil = ["certutil", "-d", f"sql:{nssdb}"]  # libnss3-tools (scripts/testrig browser)
            subprocess.run([*certutil, "-N", "--empty-password"], check=True, capture_output=True)
            subprocess.run([*certutil, "-A", "-t", "C,,", "-n", "llmrig", "-i", str(site.ca_file)], check=True)
            args.append(f"--host-resolver-rules=MAP {site.name} {site.address}")
            env["HOME"] = home
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args, env=env)
        try:
            yield browser
        finally:
            browser.close()


def screenshot_page(url: str, screenshot: Path, *, wait_for_text: str = "") -> str:
    """Open ``url``, wait for ``wait_for_text`` (when given) and save a full-page screenshot;
    the page's text."""
    with sync_playwright() as playwright, _launched(playwright, None) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        if wait_for_text:
            page.get_by_text(wait_for_text).first.wait_for()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
        return page.inner_text("body")


def _sign_in(page: Page, url: str, email: str, password: str) -> None:
    """Sign in at ``url`` and wait for the chat page (the release notes dismissed)."""
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url.rstrip("/") + "/auth")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("#chat-input")
    # The release notes greet a user once per release, a moment after the chat appears.
    welcome = page.get_by_role("button", name="Okay, Let's Go!")
    try:
        welcome.wait_for(timeout=WELCOME_MS)
        welcome.click()
    except PlaywrightTimeoutError:
        pass


def open_chat(
    url: str,
    email: str,
    password: str,
    chat_id: str,
    shown: Sequence[str],
    *,
    screenshot: Path,
    site: Site | None = None,
) -> str:
    """Sign in at ``url`` as ``email``, open the chat ``chat_id`` (its page, /c/<id>) and wait
    until each text of ``shown`` (its title, a message) is on screen; the page's text (screenshot
    saved). With ``site``, over HTTPS as :func:`chat`."""
    with sync_playwright() as playwright, _launched(playwright, site) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        _sign_in(page, url, email, password)
        page.goto(f"{url.rstrip('/')}/c/{chat_id}")
        for text in shown:
            page.get_by_text(text).first.wait_for()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot))
        return page.inner_text("body")


def chat(
    url: str, email: str, password: str, model: str, *, question: str, screenshot: Path, site: Site | None = None
) -> str:
    """Sign in at ``url``, pick ``model``, ask ``question``; the answer's text (screenshot saved).
    With ``site``, over HTTPS with its CA trusted and its name resolved to its address."""
    with sync_playwright() as playwright, _launched(playwright, site) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        _sign_in(page, url, email, password)
        page.click("#model-selector-model-button")
        page.click(f"[role=option][data-value='{model}']")
        page.click("#chat-input")
        page.keyboard.type(question)
        page.keyboard.press("Enter")
        answer = page.locator(".chat-assistant").last
        answer.wait_for()
        # The answer streams in; it is done when its Regenerate button appears.
        page.locator("[id^=message-] button[aria-label='Regenerate']").last.wait_for()
        text = answer.inner_text().strip()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot))
        return text


def report(page_file: Path, screenshot: Path) -> dict[str, object]:
    """Open ``bench report``'s page from disk; what the browser saw: each plot's natural size
    (0 when it did not decode), each card's text, the verdicts under each plot, and any request the
    page made (screenshot saved)."""
    with sync_playwright() as playwright, _launched(playwright, None) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(page_file.resolve().as_uri())
        page.wait_for_load_state("load")
        plots = page.eval_on_selector_all(
            "img[data-plot]",
            "images => images.map(i => [i.dataset.plot, i.complete ? i.naturalWidth : 0, i.naturalHeight])",
        )
        cards = page.eval_on_selector_all("[data-card]", "cards => cards.map(c => [c.dataset.card, c.innerText])")
        verdicts = page.eval_on_selector_all(
            "[data-verdicts]", "lists => lists.map(l => [l.dataset.verdicts, l.innerText])"
        )
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
        return {"plots": plots, "cards": cards, "verdicts": verdicts, "requests": requests}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.browser", description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("email")
    parser.add_argument("password_file", type=Path)
    parser.add_argument("model")
    parser.add_argument("screenshot", type=Path)
    parser.add_argument("--question", default="What is the capital of France?")
    args = parser.parse_args(argv)
    password = args.password_file.read_text(encoding="utf-8").strip()
    print(chat(args.url, args.email, password, args.model, question=args.question, screenshot=args.screenshot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
