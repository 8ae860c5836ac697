"""The built site, shared by the site tests: one strict mkdocs build of the repository's docs per session."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mkdocs_available() -> bool:
    return shutil.which("mkdocs") is not None or (Path(sys.executable).parent / "mkdocs").exists()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """``mkdocs build --strict`` of the repository into a temporary folder (skips without mkdocs)."""
    if not mkdocs_available():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=_quiet_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"mkdocs build --strict: {time.perf_counter() - start:.1f} s")  # measured, not asserted (shared machines)
    return out


def _quiet_env() -> dict[str, str]:
    import os

    return {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the browser tests (skips without it), scrollbars drawn as on a desktop (headless hides
    them by default: the layout tests look for them)."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, ignore_default_args=["--hide-scrollbars"], args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        yield launched
        launched.close()
