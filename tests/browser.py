"""A headless Chromium for tests, driven through Playwright (the system's Chromium: nothing is downloaded).

Missing Chromium fails the test when the CI environment variable is set (CI installs it with
scripts/install-system-deps.sh) and skips it elsewhere, saying how to install it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "out" / "screenshots"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    """The Chromium binary, or fail (under CI) / skip (elsewhere) when there is none."""
    for candidate in (os.environ.get("BROWSER_PATH"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      shutil.which("google-chrome")):
        if candidate and Path(candidate).exists():
            return candidate
    message = "Chromium is not installed (scripts/install-system-deps.sh installs Debian's chromium as root)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def browser(profile: Path, width: int = 1400, height: int = 1000) -> Iterator[BrowserContext]:
    """A fresh browser profile in `profile`, the flags above, a fixed viewport."""
    path = chromium()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=path, headless=True, args=FLAGS,
            viewport={"width": width, "height": height}, device_scale_factor=1)
        try:
            yield context
        finally:
            context.close()
