"""The `quicgo` stack's build: build/quicgo/bin/quicgo (native/quicgo: quic-go with HTTP/3 on Go 1.27's
crypto/tls, built by scripts/build-go.sh, step quicgo, on first use) and what that binary says it can do
(`quicgo capabilities`: every group and key type tried in a QUIC handshake on loopback UDP; the client's
signature_algorithms, Initial sizes; provenance includes quic-go's checksum)."""

from __future__ import annotations

from pqbench.endpoints.gostack import GoBuild

FIX = ("run `make stacks` or `bash scripts/build.sh quicgo` (builds native/quicgo with Go 1.27 and quic-go "
       "from the Go module proxy)")

GO_BUILD = GoBuild("quicgo", "quicgo", FIX, caps_timeout_s=120)
home, binary, require = GO_BUILD.home, GO_BUILD.binary, GO_BUILD.require
capabilities, provenance, group_name = GO_BUILD.capabilities, GO_BUILD.provenance, GO_BUILD.group_name
