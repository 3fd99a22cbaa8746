"""Debian's Chromium for the browser tests (Playwright drives it through ``executable_path``)."""

from __future__ import annotations

import shutil

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def chromium() -> str:
    """The path of Debian's ``chromium``; the test fails saying how to install it when absent."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is needed by the browser test: `make browser` installs it")
    return found
