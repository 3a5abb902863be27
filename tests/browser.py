"""Headless Chromium for the page tests (scan's HTML report, the server's paste page): Debian's
package where installed, started the way this machine's closed network needs (no background
connections, a fresh profile). Tests skip where it is absent."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def headless(profile: Path) -> list[str]:
    """The browser and the flags every page test starts it with."""
    assert CHROMIUM is not None, "no Chromium installed (apt install chromium)"
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ]
