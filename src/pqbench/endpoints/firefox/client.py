"""The `firefox` stack's client: worker processes (pqbench.endpoints.firefox.worker), each driving one headless
Firefox ESR over Marionette, one page load per sample in a new container."""

from __future__ import annotations

from pqbench.endpoints.chromium.client import Chromium


class Firefox(Chromium):
    name = "firefox"
    WORKER = "pqbench.endpoints.firefox.worker"
    MODES = {"tcp": ("handshake", "page", "resume_page", "early"), "quic": ("handshake", "page")}
