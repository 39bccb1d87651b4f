"""Opening a page in headless Chromium (Debian's `chromium`): the DOM after load and console messages."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


def binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def open_page(path: Path, timeout: float = 90) -> tuple[str, list[str]]:
    """(DOM after the load event, console lines). Every console message counts: the report logs none."""
    exe = binary()
    assert exe, "chromium is missing (scripts/build.sh installs Debian's chromium package)"
    with tempfile.TemporaryDirectory(prefix="pqb-chromium-") as profile:
        proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", Path(path).resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if re.search(r":CONSOLE[:(]|Uncaught", line)]
    return proc.stdout, console


def images(dom: str) -> dict[str, str]:
    """id -> base64 payload of every <img> with a data: PNG source."""
    out = {}
    for tag in re.findall(r"<img\b[^>]*>", dom):
        ident = re.search(r'\bid="([^"]+)"', tag)
        src = re.search(r'\bsrc="data:image/png;base64,([^"]*)"', tag)
        if ident and src:
            out[ident.group(1)] = src.group(1)
    return out


def body_attribute(dom: str, name: str) -> str | None:
    m = re.search(r"<body\b[^>]*\b" + re.escape(name) + r'="([^"]*)"', dom)
    return m.group(1) if m else None
