#!/usr/bin/env bash
# The Rust TLS stacks (native/tlsrs: pqrustls = rustls + aws-lc-rs, pqs2n = s2n-tls), installed into
# build/tlsrs/bin with build/tlsrs/PROVENANCE.json (every crate's version and checksum from Cargo.lock).
#
# Sourced by scripts/build.sh, which runs the step `tlsrs` (do_tlsrs) with its helpers (step, logged,
# is_done, restore_from_cache, save_to_cache); `scripts/build.sh tlsrs` builds just this step.
#
# Crates come from the crates registry through cargo, pinned by native/tlsrs/Cargo.lock (--locked).
# aws-lc-sys is compiled once for both stacks, with its own cc-based build (no CMake, Go or bindgen:
# its bindings ship pre-generated). The finished tree is cached by a recipe hash of Cargo.lock, the
# workspace's sources and the Rust toolchain, in build/ and in the machine cache like OpenSSL.

TLSRS_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/native/tlsrs

tlsrs_recipe() {
    local files
    files=$(cd "$TLSRS_SRC" && find . -name target -prune -o -type f \( -name '*.rs' -o -name 'Cargo.toml' -o -name 'Cargo.lock' \) -print | LC_ALL=C sort)
    { rustc --version 2>/dev/null || echo no-rustc
      (cd "$TLSRS_SRC" && sha256sum $files); } | sha256sum | cut -c1-12
}

tlsrs_crate_version() {  # name -> version pinned in Cargo.lock
    awk -v n="$1" '$1 == "name" && $3 == "\"" n "\"" {getline; gsub(/"/, "", $3); print $3; exit}' "$TLSRS_SRC/Cargo.lock"
}

tlsrs_provenance() {  # dest
    python3 - "$TLSRS_SRC/Cargo.lock" "$(rustc --version)" "$1/PROVENANCE.json" <<'EOF'
import json, sys, tomllib
lock, rustc, out = sys.argv[1], sys.argv[2], sys.argv[3]
pkgs = tomllib.load(open(lock, "rb"))["package"]
crates = {p["name"]: {"version": p["version"], "sha256": p["checksum"]} for p in pkgs if "checksum" in p}
v = lambda n: crates.get(n, {}).get("version")
json.dump({"name": "tlsrs", "source": "the crates registry, pinned by native/tlsrs/Cargo.lock",
           "rustc": rustc, "binaries": ["pqrustls", "pqs2n"],
           "versions": {"rustls": v("rustls"), "aws-lc-rs": v("aws-lc-rs"), "aws-lc-sys": v("aws-lc-sys"),
                        "rustls-webpki": v("rustls-webpki"), "s2n-tls": v("s2n-tls"), "s2n-tls-sys": v("s2n-tls-sys")},
           "crates": crates}, open(out, "w"), indent=1, sort_keys=True)
EOF
}

do_tlsrs() {
    local dest=$BUILD/tlsrs recipe rustls_v s2n_v name
    command -v cargo >/dev/null || die "cargo is needed to build the Rust TLS stacks (install Rust: apt-get install cargo)"
    recipe=$(tlsrs_recipe)
    rustls_v=$(tlsrs_crate_version rustls)
    s2n_v=$(tlsrs_crate_version s2n-tls)
    name=tlsrs-rustls$rustls_v-s2n$s2n_v-$recipe
    if is_done "$dest" "$recipe"; then step tlsrs "rustls $rustls_v, s2n-tls $s2n_v (built)"; return; fi
    if restore_from_cache "$name" "$dest"; then step tlsrs "rustls $rustls_v, s2n-tls $s2n_v (from cache $CACHE/$name)"; return; fi
    step tlsrs "building rustls $rustls_v and s2n-tls $s2n_v on aws-lc (about 1-2 minutes on 2 cores; log: $LOGS/tlsrs.log)"
    local target=$BUILD/tlsrs-target
    CARGO_TARGET_DIR=$target logged tlsrs cargo build --release --locked -j "$JOBS" --manifest-path "$TLSRS_SRC/Cargo.toml"
    rm -rf "$dest" && mkdir -p "$dest/bin"
    cp "$target/release/pqrustls" "$target/release/pqs2n" "$dest/bin/"
    tlsrs_provenance "$dest"
    echo "rustls$rustls_v-s2n$s2n_v $recipe" >"$dest/.done"
    save_to_cache "$name" "$dest"
    step tlsrs "built $dest/bin/pqrustls and pqs2n"
}
