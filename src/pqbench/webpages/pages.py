"""What a page is: its origins and the resources each serves, with sizes typical of the web (tens of kB per
response: a document, and per further origin a stylesheet, a script and an image).

    single       one document from one origin: one connection, one TLS handshake
    origins-N    a document from origin 0 naming a stylesheet, a script and an image on each of origins 1..N-1
                 (N = 2..8): N connections, one per origin, and two TLS handshakes on the critical path (the
                 document's, then the other origins' together)
"""

from __future__ import annotations

import dataclasses
import re

from pqbench.errors import BadInput

MAX_ORIGINS = 8
DOCUMENT_BYTES = 30_000
# a further origin's resources: (kind, file suffix, bytes)
PER_ORIGIN = (("stylesheet", "css", 20_000), ("script", "js", 60_000), ("image", "png", 40_000))


@dataclasses.dataclass(frozen=True)
class Resource:
    origin: int  # 0: the document's origin
    path: str  # under the origin's root, e.g. /res/o1-script.js
    kind: str  # document, stylesheet, script, image
    size: int  # bytes of the body


@dataclasses.dataclass(frozen=True)
class WebPage:
    name: str
    origins: int
    resources: tuple[Resource, ...]

    @property
    def document(self) -> Resource:
        return self.resources[0]


def parse(field: str, value) -> str:
    """A page's name, checked: "single" or "origins-N"."""
    text = str(value).strip().lower()
    m = re.fullmatch(r"origins-(\d+)", text)
    if text == "single" or (m and 2 <= int(m.group(1)) <= MAX_ORIGINS):
        return text
    raise BadInput(field, f"{value!r} is not a page (allowed: single, origins-N with N 2..{MAX_ORIGINS})")


def document_path(name: str, port: int | None = None) -> str:
    """Where a page's document is: one per port when served by a run's nginx (its URLs name the port)."""
    return f"/pages/{name}" + (f"-{port}" if port else "") + ".html"


def page(name: str, port: int | None = None) -> WebPage:
    name = parse("page", name)
    n = 1 if name == "single" else int(name.split("-")[1])
    doc = Resource(0, document_path(name, port), "document", DOCUMENT_BYTES)
    more = tuple(Resource(k, f"/res/o{k}-{kind}.{suffix}", kind, size)
                 for k in range(1, n) for kind, suffix, size in PER_ORIGIN)
    return WebPage(name, n, (doc, *more))


def origin_name(k: int) -> str:
    return f"origin{k}.pqbench.test"
