"""The `gotls` stack's build: build/gotls/bin/tlsgo (native/tlsgo, Go 1.27 crypto/tls, built by
scripts/build-go.sh) and what that binary says it can do (`tlsgo capabilities`: every group and key type
tried in a handshake in memory; the client's signature_algorithms(_cert) as sent)."""

from __future__ import annotations

from pqbench.endpoints.gostack import GoBuild

FIX = "run `make` (scripts/build-go.sh builds native/tlsgo with Go 1.27 from the Go module proxy)"

GO_BUILD = GoBuild("gotls", "tlsgo", FIX, caps_timeout_s=60)
home, binary, require = GO_BUILD.home, GO_BUILD.binary, GO_BUILD.require
capabilities, provenance, group_name = GO_BUILD.capabilities, GO_BUILD.provenance, GO_BUILD.group_name
