# Sourced (not executed): sets up Go for pqbench's own builds and tests, nothing else.
#   source scripts/go-env.sh && go version      # -> go1.27.3
# The Go stacks (crypto/tls, x/crypto/ssh) need Go 1.27 (ML-DSA, pure MLKEM1024); the machine's Go may
# be older. The issue suggested Debian's trixie-backports golang-1.27-go, but the sanctioned way to get
# a Go toolchain on this machine is the one the go command itself has: GOTOOLCHAIN=go1.27.3 makes the
# installed go command fetch that exact toolchain as a module from the Go module proxy (checked against
# the Go checksum database, about 76 MB) and run it. Everything is exported only in the shell that
# sources this file: the system's Go, its GOROOT and its go env file (GOTOOLCHAIN=local there) stay
# untouched. GOPROXY/GOSUMDB are left as the machine has them (a local mirror keeps working).
# What Go writes is keyed by version (modules) or content (builds) by the go command itself, so like
# the other third-party builds it is shared by the checkouts of this machine, in $PQBENCH_CACHE/go
# (default /var/cache/pqbench/go; under build/go/ when that cannot be written):
#   mod    module cache (the toolchain golang.org/toolchain@v0.0.1-go1.27.3.<os>-<arch> and the
#          modules pinned by each go.sum)
#   cache  build cache (a fresh clone's Go tests compile only what changed)
# GOPATH stays in build/go/path. The module cache is read-only as Go makes it:
# `chmod -R u+w DIR && rm -rf DIR` removes it.

PQB_GO_VERSION=${PQB_GO_VERSION:-1.27.3}
_pqb_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PQB_GO_HOME=$_pqb_root/build/go
PQB_GO_SHARED=${PQBENCH_CACHE:-/var/cache/pqbench}/go
if ! { mkdir -p "$PQB_GO_SHARED" && [ -w "$PQB_GO_SHARED" ]; } 2>/dev/null; then
    PQB_GO_SHARED=$PQB_GO_HOME
fi
unset _pqb_root

export GOTOOLCHAIN=go$PQB_GO_VERSION
export GOPATH=$PQB_GO_HOME/path
export GOMODCACHE=$PQB_GO_SHARED/mod
export GOCACHE=$PQB_GO_SHARED/cache
# readonly: go.mod/go.sum are committed and never rewritten by a build; buildvcs off: binaries do not
# depend on the checkout's git state (provenance records versions and checksums instead).
export GOFLAGS="-mod=readonly -buildvcs=false -modcacherw"
export PQB_GO_VERSION PQB_GO_HOME PQB_GO_SHARED

