"""Open WebUI in a real browser: Debian's Chromium driven by Playwright (``playwright`` from PyPI,
``executable_path`` pointed at the system browser; Playwright's own browser download is not
used). Signs in, picks the model, sends one message, waits for the answer and saves a screenshot.

``python -m tests.browser URL EMAIL PASSWORD_FILE MODEL SCREENSHOT`` does the same for
``scripts/demo``; the password is read from its file, never passed on a command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

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


def chat(url: str, email: str, password: str, model: str, *, question: str, screenshot: Path) -> str:
    """Sign in at ``url``, pick ``model``, ask ``question``; the answer's text (screenshot saved)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
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
        finally:
            browser.close()


def report(page_file: Path, screenshot: Path) -> dict[str, object]:
    """Open ``bench report``'s page from disk; what the browser saw: each plot's natural size
    (0 when it did not decode), each card's text, and any request the page made (screenshot saved)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
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
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            return {"plots": plots, "cards": cards, "requests": requests}
        finally:
            browser.close()


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
