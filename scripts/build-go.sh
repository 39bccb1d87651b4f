# Go parts of the build. Sourced by scripts/build.sh after its helpers (step, logged, die, recipe_hash,
# is_done, restore_from_cache, save_to_cache, ROOT, BUILD, CACHE) are defined; not run on its own.
#   go_build_module NAME MODULE_DIR [PACKAGE ...]   builds MODULE_DIR's main packages (default ./cmd/...)
#                                                   into build/NAME/bin
#   do_gotls                                        native/tlsgo -> build/gotls/bin/tlsgo
#   do_quicgo                                       native/quicgo (quic-go + HTTP/3) -> build/quicgo/bin/quicgo
#   do_dtlsgo                                       native/dtlsgo (pion/dtls, DTLS 1.3) -> build/dtlsgo/bin/dtlsgo
# Go itself comes from scripts/go-env.sh (Go 1.27 fetched by the installed go command from the Go
# module proxy); modules are pinned by the module's committed go.sum and fetched from the Go module
# proxy into the Go module cache (scripts/go-env.sh). What the Go stacks share is the local module native/gotlskit, which their
# go.mod files replace by its directory. A finished tree is marked by .done ("GOVERSION RECIPE"); the
# recipe hashes the Go version, go.mod, go.sum, every source file of the module and of the local
# modules it replaces, and the build flags, so changing any of them rebuilds that module and nothing
# else (a change to gotlskit rebuilds both stacks). Finished trees are copied to the machine cache
# ($PQBENCH_CACHE) like OpenSSL, so a fresh clone on the same machine needs no network for them.

# shellcheck source=go-env.sh
source "$ROOT/scripts/go-env.sh"

PQB_GO_BUILD_FLAGS=(-trimpath -ldflags=-s)

# The directories of the local modules a module's go.mod replaces ("replace X => ../gotlskit"):
# their sources are part of its build.
go_local_modules() {  # module_dir
    local rel
    sed -n 's/^replace .* => \(\.\.\{0,1\}\/[^ ]*\)[[:space:]]*$/\1/p' "$1/go.mod" | while read -r rel; do
        (cd "$1/$rel" && pwd)
    done
}

# Hash of everything a module's binaries and test binaries depend on, its local modules' sources
# included, the toolchain by its version.
go_recipe() {  # module_dir
    local dir=$1 d
    {
        echo "go$PQB_GO_VERSION ${PQB_GO_BUILD_FLAGS[*]}"
        for d in "$dir" $(go_local_modules "$dir"); do
            echo "module $(basename "$d")"
            (cd "$d" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name '*.s' -o -path './testdata/*' \) \
                | LC_ALL=C sort | xargs sha256sum)
        done
    } | sha256sum | cut -c1-12
}

# go mod verify, the local modules apart: Go 1.27 also looks for the download hash of a module
# replaced by a directory (gotlskit), which has none; any other complaint still fails the build.
go_mod_verify() {  # in the module's directory
    local out local_mods
    out=$(go mod verify 2>&1) && { echo "$out"; return 0; }
    echo "$out"
    local_mods=$(go list -m -f '{{if .Replace}}{{if not .Replace.Version}}{{.Path}}{{end}}{{end}}' all)
    ! echo "$out" | grep -v -E "^($(echo "$local_mods" | paste -sd'|')) v[^ ]*: missing ziphash: " | grep -q .
}

# The module's unit tests compiled once here, not in every test run (a test that compiled them took 99 s beside
# the suite): build/NAME/tests/ holds one binary per package with tests and PACKAGES ("import path<TAB>directory
# relative to the checkout<TAB>binary" per line), which tests/conftest.py's go_unit_tests runs.
go_build_tests() {  # dest module_dir [extra package ...]
    local dest=$1 dir=$2; shift 2
    mkdir -p "$dest/tests"
    : >"$dest/tests/PACKAGES"
    local path pdir bin
    while IFS='|' read -r path pdir; do
        [ -n "$path" ] || continue
        bin=$(echo "$path" | tr '/.' '__').test
        (cd "$dir" && go test -c "${PQB_GO_BUILD_FLAGS[@]}" -o "$dest/tests/$bin" "$path") || return 1
        printf '%s\t%s\t%s\n' "$path" "${pdir#"$ROOT"/}" "$bin" >>"$dest/tests/PACKAGES"
    done < <(cd "$dir" && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}|{{.Dir}}{{end}}' ./... "$@")
}

go_build_module() {  # name module_dir [package ...]   (GO_TEST_EXTRA: more packages whose tests it builds)
    local name=$1 dir=$2; shift 2
    local pkgs=("$@"); [ ${#pkgs[@]} -gt 0 ] || pkgs=(./cmd/...)
    local dest=$BUILD/$name recipe
    [ -f "$dir/go.mod" ] || die "$dir has no go.mod"
    command -v go >/dev/null || die "a go command is needed to fetch go$PQB_GO_VERSION (any Go >= 1.21 does; Debian: apt-get install golang-go)"
    [ -f "$dir/go.sum" ] || die "$dir has no go.sum (run: source scripts/go-env.sh && cd $dir && GOFLAGS=-mod=mod go mod tidy)"
    recipe=$(go_recipe "$dir")
    local cname=$name-go$PQB_GO_VERSION-$recipe
    if is_done "$dest" "$recipe"; then step "$name" "go$PQB_GO_VERSION (built)"; return; fi
    if restore_from_cache "$cname" "$dest"; then step "$name" "go$PQB_GO_VERSION (from cache $CACHE/$cname)"; return; fi
    step "$name" "fetching go$PQB_GO_VERSION and the modules pinned by $(basename "$dir")/go.sum from the Go module proxy"
    (cd "$dir" && logged "$name" go mod download && logged "$name" go_mod_verify)
    local have
    have=$(cd "$dir" && go env GOVERSION)
    [ "$have" = "go$PQB_GO_VERSION" ] || die "the go command runs $have, not go$PQB_GO_VERSION (GOTOOLCHAIN=$GOTOOLCHAIN)"
    rm -rf "$dest" && mkdir -p "$dest/bin"
    step "$name" "building ${pkgs[*]} with $have (log: $LOGS/$name.log)"
    (cd "$dir" && logged "$name" go build "${PQB_GO_BUILD_FLAGS[@]}" -o "$dest/bin/" "${pkgs[@]}")
    # shellcheck disable=SC2086
    logged "$name" go_build_tests "$dest" "$dir" ${GO_TEST_EXTRA:-}
    go_provenance "$name" "$dir" >"$dest/PROVENANCE.json"
    echo "go$PQB_GO_VERSION $recipe" >"$dest/.done"
    save_to_cache "$cname" "$dest"
    step "$name" "built into $dest/bin ($(cd "$dest/bin" && ls | paste -sd " "))"
}

# {"name", "go", "toolchain": {module, sum}, "module", "modules": [{path, version, sum}]}: the toolchain's
# and every dependency's checksum as the Go checksum database knows them.
go_provenance() {  # name module_dir
    local name=$1 dir=$2
    (cd "$dir" && go list -m -json all) | python3 -c '
import json, sys, os
name, gover, gomod, modcache, plat = sys.argv[1:6]
dec = json.JSONDecoder(); text = sys.stdin.read(); mods = []; i = 0
while i < len(text):
    if text[i].isspace(): i += 1; continue
    obj, i = dec.raw_decode(text, i); mods.append(obj)
main = next(m["Path"] for m in mods if m.get("Main"))
deps = []
sums = {}
for line in open(os.path.join(os.path.dirname(gomod), "go.sum")):
    p, v, h = line.split()
    if not v.endswith("/go.mod"): sums[(p, v)] = h
for m in mods:
    if m.get("Main"): continue
    deps.append({"path": m["Path"], "version": m["Version"], "sum": sums.get((m["Path"], m["Version"]))})
tc = "golang.org/toolchain@v0.0.1-%s.%s" % (gover, plat)
ziphash = os.path.join(modcache, "cache/download/golang.org/toolchain/@v/v0.0.1-%s.%s.ziphash" % (gover, plat))
tsum = open(ziphash).read().strip() if os.path.exists(ziphash) else None
json.dump({"name": name, "go": gover, "source": "the Go module proxy (toolchain and modules, checked against the Go checksum database)",
           "toolchain": {"module": tc, "sum": tsum}, "module": main,
           "modules": [d for d in deps if d["sum"]]}, sys.stdout, indent=1)
print()
' "$name" "go$PQB_GO_VERSION" "$dir/go.mod" "$GOMODCACHE" "$(go env GOHOSTOS)-$(go env GOHOSTARCH)"
}

do_gotls() { GO_TEST_EXTRA=pqbench/native/gotlskit go_build_module gotls "$ROOT/native/tlsgo"; }
do_quicgo() { go_build_module quicgo "$ROOT/native/quicgo"; }
do_dtlsgo() { go_build_module dtlsgo "$ROOT/native/dtlsgo"; }
