#!/usr/bin/env bash
# Builds what pqbench needs into build/, one progress line per step, idempotent.
#   scripts/build.sh [step|group ...]   steps: the STEPS list at the end; groups (default: core):
#     core    what the demo needs: Debian packages, OpenSSL, liboqs, the venv, native/ (pqprov, pqtimer,
#             pqlink, cryptobench), the OpenSSL config
#     stacks  liboqs with the catalog's algorithms and the optional stacks: rustls + s2n-tls, Go's
#             crypto/tls, OpenSSH, Go's SSH, strongSwan (pqbench also builds each on first use)
#     test    what only the tests need beyond core and stacks (chromium for the report tests)
#     all     core, stacks and test
# Third-party builds are cached by version and recipe hash in build/ and, for fresh clones on the
# same machine, in $PQBENCH_CACHE (default /var/cache/pqbench); they are built from nothing otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${PQBENCH_BUILD:-$ROOT/build}
CACHE=${PQBENCH_CACHE:-/var/cache/pqbench}
JOBS=${JOBS:-$(nproc)}
LOGS=$BUILD/logs
# shellcheck source=../third_party/versions.env
source "$ROOT/third_party/versions.env"
mkdir -p "$BUILD" "$LOGS"

step() { printf '[build] %-8s %s\n' "$1" "$2"; }
die() { printf '[build] error: %s\n' "$*" >&2; exit 1; }
# Runs a noisy command with its output in a log; on failure shows the log's tail.
logged() {
    local log=$LOGS/$1.log; shift
    if ! "$@" >>"$log" 2>&1; then
        tail -n 40 "$log" >&2
        die "'$*' failed; full log: $log"
    fi
}
# How each third-party component is configured; its hash keys the caches, so changing a flag
# rebuilds that component and nothing else.
# zlib, brotli and zstd: certificate compression (RFC 8879), linked from Debian's libraries (the -dev
# packages in APT_PACKAGES); OpenSSL only compresses certificates with the algorithms it was built with.
OPENSSL_CONFIGURE=(linux-x86_64 --libdir=lib shared no-tests no-docs enable-zlib enable-brotli enable-zstd
                   '-Wl,-rpath,\$$ORIGIN/../lib')
# Shared libraries only: with the static ones too, OpenSSL 3 compiles all of libcrypto twice (one set of
# objects per library), and nothing here links it statically.
OPENSSL_MAKE=(LIBS= INSTALL_LIBS=)
LIBOQS_CMAKE=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DOQS_BUILD_ONLY_LIB=ON
              -DOQS_ENABLE_KEM_HQC=ON -DOQS_USE_OPENSSL=OFF -DOQS_DIST_BUILD=ON -DCMAKE_INSTALL_LIBDIR=lib)
recipe_hash() { printf '%s\n' "$@" | sha256sum | cut -c1-12; }
OPENSSL_RECIPE=$(recipe_hash "$OPENSSL_VERSION" "$OPENSSL_SHA256" "${OPENSSL_CONFIGURE[@]}" "${OPENSSL_MAKE[@]}")
# liboqs is built with only the algorithms pqbench can use (scripts/liboqs_algorithms.py): `make` those the
# demo's spec needs (step liboqs, seconds), every one the catalog names when a command first needs another
# (step liboqs-catalog, minutes; pqbench.endpoints.ondemand). The list keys the cache.
LIBOQS_DEMO_SPEC=$ROOT/experiments/quick.toml
LIBOQS_RECIPE=$(recipe_hash "$OQS_SYS_VERSION" "${LIBOQS_CMAKE[@]}" $(python3 "$ROOT/scripts/liboqs_algorithms.py"))
LIBOQS_DEMO_RECIPE=$(recipe_hash "$OQS_SYS_VERSION" "${LIBOQS_CMAKE[@]}" \
                     $(python3 "$ROOT/scripts/liboqs_algorithms.py" --spec "$LIBOQS_DEMO_SPEC"))
# .done holds "VERSION RECIPE" of a finished install tree.
is_done() { [ -f "$1/.done" ] && [ "$(cut -d' ' -f2 "$1/.done")" = "$2" ]; }

# A finished install tree is marked by a .done file; the machine-wide cache holds copies of them.
restore_from_cache() {  # name dest
    local src=$CACHE/$1
    [ -f "$src/.done" ] || return 1
    rm -rf "$2" && mkdir -p "$(dirname "$2")" && cp -a "$src" "$2"
}
save_to_cache() {  # name dest
    { mkdir -p "$CACHE" && rm -rf "$CACHE/$1.tmp" && cp -a "$2" "$CACHE/$1.tmp" \
        && rm -rf "${CACHE:?}/$1" && mv "$CACHE/$1.tmp" "$CACHE/$1"; } 2>/dev/null || true
}

APT_PACKAGES=(nginx-light curl iproute2 ethtool tcpdump ca-certificates dpkg-dev
              build-essential cmake ninja-build pkg-config python3-venv perl
              zlib1g-dev libbrotli-dev libzstd-dev)
APT_TEST_PACKAGES=(chromium)  # the report tests open the report in a headless browser; the demo does not
do_apt() { apt_install "${APT_PACKAGES[@]}"; }
do_apt_test() { apt_install "${APT_TEST_PACKAGES[@]}"; }
apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then step apt "all Debian packages present"; return; fi
    [ "$(id -u)" = 0 ] || die "Debian packages missing (${missing[*]}); run as root or: sudo apt-get install ${missing[*]}"
    step apt "installing ${missing[*]}"
    logged apt apt-get update
    DEBIAN_FRONTEND=noninteractive logged apt apt-get install -y --no-install-recommends "${missing[@]}"
    # Debian starts nginx on install; pqbench runs its own instances only inside namespaces.
    systemctl disable --now nginx >/dev/null 2>&1 || service nginx stop >/dev/null 2>&1 || true
}

# --- OpenSSL: the upstream tarball inside Debian's openssl source package, pinned by version and checksum --
# The mirror is the one this machine's own apt configuration uses for Debian (a machine behind a local
# mirror or proxy works as it does for apt); the pool path is Debian's archive layout.
debian_mirror() {
    local uri
    uri=$(apt-get indextargets --format '$(REPO_URI) $(TARGET_OF) $(SUITE)' 2>/dev/null \
          | awk '$2 == "deb" && $3 !~ /security/ {print $1; exit}')
    [ -n "$uri" ] || die "no Debian archive in this machine's apt configuration (needed to fetch the OpenSSL source; run apt-get update)"
    echo "${uri%/}"
}

debian_fetch() {  # pool_path sha256 log where_pinned -> prints the path of the verified file
    local pool=$1 sha=$2 log=$3 pinned=$4 dl=$BUILD/downloads name
    name=$(basename "$pool")
    mkdir -p "$dl"
    if ! echo "$sha  $dl/$name" | sha256sum -c --status 2>/dev/null; then
        logged "$log" curl -fsSL --retry 3 -o "$dl/$name.part" "$(debian_mirror)/$pool"
        echo "$sha  $dl/$name.part" | sha256sum -c --status \
            || die "$name from Debian's archive does not have the sha256 pinned in $pinned"
        mv "$dl/$name.part" "$dl/$name"
    fi
    echo "$dl/$name"
}

openssl_fetch() {  # prints the path of the verified orig tarball
    debian_fetch "pool/main/o/openssl/openssl_$OPENSSL_VERSION.orig.tar.gz" "$OPENSSL_SHA256" openssl-fetch \
        third_party/versions.env
}

do_openssl() {
    local name=openssl-$OPENSSL_VERSION-$OPENSSL_RECIPE dest=$BUILD/openssl
    if is_done "$dest" "$OPENSSL_RECIPE"; then step openssl "$OPENSSL_VERSION (built)"; return; fi
    if restore_from_cache "$name" "$dest"; then step openssl "$OPENSSL_VERSION (from cache $CACHE/$name)"; return; fi
    step openssl "fetching $OPENSSL_VERSION source from Debian's archive"
    local tarball src
    tarball=$(openssl_fetch)
    src=$BUILD/src/openssl-$OPENSSL_VERSION
    rm -rf "$src" && mkdir -p "$BUILD/src" && tar -xzf "$tarball" -C "$BUILD/src"
    [ -f "$src/util/mkdef.pl" ] || die "$tarball is not a complete OpenSSL tree (no util/mkdef.pl)"
    rm -rf "$dest"
    step openssl "building $OPENSSL_VERSION shared (about 3 minutes on 2 cores; log: $LOGS/openssl.log)"
    (cd "$src" && logged openssl ./Configure "${OPENSSL_CONFIGURE[@]}" --prefix="$dest" --openssldir="$dest/ssl" \
        && logged openssl make -j"$JOBS" "${OPENSSL_MAKE[@]}" build_sw \
        && logged openssl make "${OPENSSL_MAKE[@]}" install_sw install_ssldirs)
    cat >"$dest/PROVENANCE.json" <<EOF
{"name": "openssl", "version": "$OPENSSL_VERSION", "source": "Debian's archive, source package openssl (upstream orig tarball)",
 "tarball": "$(basename "$tarball")", "sha256": "$OPENSSL_SHA256"}
EOF
    echo "$OPENSSL_VERSION $OPENSSL_RECIPE" >"$dest/.done"
    save_to_cache "$name" "$dest"
    rm -rf "$src"
    step openssl "$OPENSSL_VERSION built (sha256 of source $OPENSSL_SHA256)"
}

# --- liboqs: vendored in the oqs-sys crate, fetched by cargo with the checksum in Cargo.lock -------
do_liboqs() {  # the demo's algorithms, unless the catalog's are built already or in the cache
    if is_done "$BUILD/liboqs" "$LIBOQS_RECIPE"; then step liboqs "$LIBOQS_VERSION (built, the catalog's algorithms)"; return; fi
    local catalog=liboqs-$LIBOQS_VERSION-$LIBOQS_RECIPE
    if ! is_done "$BUILD/liboqs" "$LIBOQS_DEMO_RECIPE" && restore_from_cache "$catalog" "$BUILD/liboqs"; then
        step liboqs "$LIBOQS_VERSION, the catalog's algorithms (from cache $CACHE/$catalog)"; return
    fi
    build_liboqs "$LIBOQS_DEMO_RECIPE" "the demo's" --spec "$LIBOQS_DEMO_SPEC"
}
do_liboqs-catalog() { build_liboqs "$LIBOQS_RECIPE" "the catalog's"; }

build_liboqs() {  # recipe what [--spec SPEC]: into build/liboqs, with the algorithms liboqs_algorithms.py lists
    local recipe=$1 what=$2 dest=$BUILD/liboqs; shift 2
    local name=liboqs-$LIBOQS_VERSION-$recipe
    if is_done "$dest" "$recipe"; then step liboqs "$LIBOQS_VERSION (built, $what algorithms)"; return; fi
    if restore_from_cache "$name" "$dest"; then step liboqs "$LIBOQS_VERSION (from cache $CACHE/$name)"; return; fi
    step liboqs "fetching oqs-sys $OQS_SYS_VERSION from the crates registry"
    local fetch=$ROOT/third_party/liboqs-fetch
    command -v cargo >/dev/null || die "cargo is needed to fetch the oqs-sys crate (install Rust: apt-get install cargo)"
    logged liboqs-fetch cargo fetch --locked --manifest-path "$fetch/Cargo.toml"
    local crate home=${CARGO_HOME:-$HOME/.cargo}
    crate=$(ls "$home"/registry/cache/*/oqs-sys-"$OQS_SYS_VERSION".crate | head -n1)
    [ -f "$crate" ] || die "oqs-sys $OQS_SYS_VERSION not found in the cargo cache"
    local sha want
    sha=$(sha256sum "$crate" | cut -d' ' -f1)
    want=$(grep -A3 'name = "oqs-sys"' "$fetch/Cargo.lock" | awk -F'"' '/checksum/{print $2}')
    [ "$sha" = "$want" ] || die "oqs-sys crate checksum $sha does not match Cargo.lock ($want)"
    local src=$BUILD/src/oqs-sys
    rm -rf "$src" && mkdir -p "$src" && tar -xzf "$crate" -C "$src" --strip-components=1
    rm -rf "$dest" "$BUILD/src/liboqs-build"
    local algs
    algs=$(python3 "$ROOT/scripts/liboqs_algorithms.py" "$@" "$src/liboqs" 2>>"$LOGS/liboqs.log") \
        || die "the catalog names an algorithm liboqs $LIBOQS_VERSION lacks; see $LOGS/liboqs.log"
    step liboqs "building $LIBOQS_VERSION shared with $what algorithms ($(tr ';' '\n' <<<"$algs" | wc -l); log: $LOGS/liboqs.log)"
    logged liboqs cmake -S "$src/liboqs" -B "$BUILD/src/liboqs-build" -G Ninja "${LIBOQS_CMAKE[@]}" \
        -DOQS_MINIMAL_BUILD="$algs" -DCMAKE_INSTALL_PREFIX="$dest"
    logged liboqs cmake --build "$BUILD/src/liboqs-build" -j "$JOBS"
    logged liboqs cmake --install "$BUILD/src/liboqs-build"
    python3 "$ROOT/scripts/liboqs_algorithms.py" "$@" >"$dest/algorithms.txt"  # what it has, by liboqs name
    cat >"$dest/PROVENANCE.json" <<EOF
{"name": "liboqs", "version": "$LIBOQS_VERSION", "source": "the crates registry, oqs-sys $OQS_SYS_VERSION (vendored liboqs)",
 "sha256": "$sha", "cmake": "${LIBOQS_CMAKE[*]}", "algorithms": "$algs"}
EOF
    echo "$LIBOQS_VERSION $recipe" >"$dest/.done"
    save_to_cache "$name" "$dest"
    rm -rf "$src" "$BUILD/src/liboqs-build"
    step liboqs "$LIBOQS_VERSION built"
}

# --- the project's own parts --------------------------------------------------------------------
# The venv (pip: mostly downloads and unpacking) is made in the background while OpenSSL and liboqs
# compile, and waited for before the steps that need it.
VENV_JOB=
do_venv_start() {
    [ -z "$VENV_JOB" ] || return 0
    do_venv >"$LOGS/venv-step.out" 2>&1 &
    VENV_JOB=$!
}
do_venv_wait() {
    [ -n "$VENV_JOB" ] || { do_venv; return; }
    local rc=0
    wait "$VENV_JOB" || rc=$?
    cat "$LOGS/venv-step.out"
    VENV_JOB=
    [ $rc -eq 0 ] || die "the Python virtualenv failed (log: $LOGS/venv.log)"
}

do_venv() {
    local venv=$BUILD/venv stamp
    stamp=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-12)
    if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$stamp" ]; then step venv "up to date"; return; fi
    step venv "creating $venv and installing pqbench (editable) with its Python deps"
    [ -x "$venv/bin/python" ] || logged venv python3 -m venv "$venv"
    logged venv "$venv/bin/pip" install -q -e "$ROOT[test,cluster]"
    echo "$stamp" >"$venv/.stamp"
}

do_native() {
    step native "building native/ (pqlink, cryptobench, ...) with CMake"
    logged native cmake -S "$ROOT/native" -B "$BUILD/native" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DPQB_OPENSSL_ROOT="$BUILD/openssl" -DPQB_LIBOQS_ROOT="$BUILD/liboqs"
    logged native cmake --build "$BUILD/native" -j "$JOBS"
    step native "done"
}

# OPENSSL_CONF for our OpenSSL: default provider now; pqprov joins it when built.
do_conf() {
    "$BUILD/venv/bin/python" -m pqbench.algorithms.openssl_build write-config >/dev/null
    step conf "$BUILD/openssl.cnf written"
}

# The other stacks' builds, each in a file of its own.
# shellcheck source=build-rust.sh
source "$ROOT/scripts/build-rust.sh"   # do_tlsrs: rustls and s2n-tls (native/tlsrs); do_tlsboring: BoringSSL
# shellcheck source=build-go.sh
source "$ROOT/scripts/build-go.sh"     # do_gotls: Go 1.27's crypto/tls (native/tlsgo); go_build_module
# shellcheck source=build-ssh.sh
source "$ROOT/scripts/build-ssh.sh"    # do_openssh: OpenSSH 10 from Debian's archive; do_sshgo: native/sshgo
# shellcheck source=build-nginx-h3.sh
source "$ROOT/scripts/build-nginx-h3.sh"  # do_nginx-h3: nginx with HTTP/3 on our OpenSSL (the QUIC server)
# shellcheck source=build-ike.sh
source "$ROOT/scripts/build-ike.sh"    # do_strongswan: strongSwan 6 (IKEv2) on our OpenSSL
# --- browsers: the chromium client stack, from Debian's archive (certutil makes each profile's NSS database) ---
do_chromium() {
    apt_install chromium libnss3-tools
    local version
    version=$(chromium --version 2>/dev/null | awk '{print $2}')
    [ -n "$version" ] || die "chromium is installed but does not start: chromium --version printed nothing"
    mkdir -p "$BUILD/chromium" && echo "$version apt" >"$BUILD/chromium/.done"
    step chromium "$version (Debian's archive)"
}
do_firefox() {
    apt_install firefox-esr libnss3-tools
    local version
    version=$(firefox-esr --version 2>/dev/null | awk '{print $3}')
    [ -n "$version" ] || die "firefox-esr is installed but does not start: firefox-esr --version printed nothing"
    mkdir -p "$BUILD/firefox" && echo "$version apt" >"$BUILD/firefox/.done"
    step firefox "$version (Debian's archive)"
}

STEPS=(apt openssl liboqs liboqs-catalog venv native conf tlsrs tlsboring gotls quicgo dtlsgo openssh sshgo nginx-h3 strongswan chromium firefox apt_test)
declare -A STEP_GROUPS=([core]="apt venv_start openssl liboqs venv_wait native conf"
                   [stacks]="liboqs-catalog tlsrs tlsboring gotls quicgo dtlsgo openssh sshgo nginx-h3 strongswan"
                   [test]="apt_test chromium firefox")
STEP_GROUPS[all]="${STEP_GROUPS[core]} ${STEP_GROUPS[stacks]} ${STEP_GROUPS[test]}"
steps=()
for a in "${@:-core}"; do
    if [ -n "${STEP_GROUPS[$a]:-}" ]; then
        read -ra more <<<"${STEP_GROUPS[$a]}"
        steps+=("${more[@]}")
    else
        case " ${STEPS[*]} " in
            *" $a "*) steps+=("$a") ;;
            *) die "unknown step '$a' (allowed: ${STEPS[*]}; groups: ${!STEP_GROUPS[*]})" ;;
        esac
    fi
done
for s in "${steps[@]}"; do "do_$s"; done
