"""The `dtlsgo` stack's build: build/dtlsgo/bin/dtlsgo (native/dtlsgo: pion/dtls v4 on Go 1.27, built by
scripts/build-go.sh, step dtlsgo, on first use) and what that binary says it can do (`dtlsgo capabilities`:
every group and key type tried in a DTLS 1.3 handshake on loopback UDP; provenance includes pion's checksum)."""

from __future__ import annotations

from pqbench.endpoints.gostack import GoBuild

FIX = ("run `make stacks` or `bash scripts/build.sh dtlsgo` (builds native/dtlsgo with Go 1.27 and pion/dtls "
       "from the Go module proxy)")

GO_BUILD = GoBuild("dtlsgo", "dtlsgo", FIX, caps_timeout_s=120)
home, binary, require = GO_BUILD.home, GO_BUILD.binary, GO_BUILD.require
capabilities, provenance, group_name = GO_BUILD.capabilities, GO_BUILD.provenance, GO_BUILD.group_name
