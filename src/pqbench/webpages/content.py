"""A page's files on disk, as an origin's nginx serves them: the document names each resource by its origin's
URL (https://originK.pqbench.test:PORT/…) in the tags a browser fetches before its load event (stylesheets
and scripts in the head, images in the body). Bodies are random bytes (incompressible, so what crosses the link
is the size chosen) inside each type's comment syntax where it has one; an image's bytes do not decode, which
costs the load nothing but the browser's failed decode."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from pqbench.webpages.pages import WebPage, origin_name

TAGS = {"stylesheet": '<link rel="stylesheet" href="{url}">', "script": '<script src="{url}"></script>',
        "image": '<img src="{url}" alt="">'}
WRAP = {"stylesheet": ("/* ", " */\n"), "script": ("// ", "\n"), "image": ("", ""), "document": ("<!-- ", " -->\n")}


def _filler(n: int) -> str:
    return base64.b64encode(os.urandom(n))[:n].decode() if n > 0 else ""


def body(kind: str, size: int, head: str = "") -> bytes:
    """size bytes: head, then filler inside the kind's comment syntax."""
    if kind == "image":
        return os.urandom(size)
    start, end = WRAP[kind]
    return (head + start + _filler(size - len(head) - len(start) - len(end)) + end).encode()


def document(page: WebPage, port: int, origin0: str | None = None) -> bytes:
    """origin0: the document's own origin's name where it is not origin0.pqbench.test (a run's site)."""
    host = lambda k: origin0 if k == 0 and origin0 else origin_name(k)  # noqa: E731
    url = lambda r: f"https://{host(r.origin)}:{port}{r.path}"  # noqa: E731
    head = "".join(TAGS[r.kind].format(url=url(r)) for r in page.resources[1:] if r.kind != "image")
    imgs = "".join(TAGS[r.kind].format(url=url(r)) for r in page.resources[1:] if r.kind == "image")
    html = f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{page.name}</title>{head}</head><body>{imgs}"
    tail = "</body></html>\n"
    return body("document", page.document.size - len(tail), html) + tail.encode()


def write(www: Path, page: WebPage, port: int, origin0: str | None = None) -> None:
    """The page's document and resources under www (every origin serves the same root)."""
    for r in page.resources:
        path = www / r.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(document(page, port, origin0) if r.kind == "document" else body(r.kind, r.size))
