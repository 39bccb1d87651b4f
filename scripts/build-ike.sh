# IKEv2 parts of the build. Sourced by scripts/build.sh after its helpers (step, logged, die, recipe_hash,
# is_done, restore_from_cache, save_to_cache, apt_install, debian_fetch, ROOT, BUILD, CACHE, JOBS,
# OPENSSL_VERSION, OPENSSL_RECIPE); not run on its own.
#   do_strongswan   strongSwan 6.1 (the upstream tarball of Debian's strongswan source package) on our
#                   OpenSSL -> build/strongswan/libexec/ipsec/charon
#
# One monolithic, static charon with only the plugins an IKEv2 handshake with certificates needs: its key
# exchanges (x25519, ecp*, the ML-KEMs of its own `ml` plugin, RFC 9370's additional key exchanges in
# IKE_INTERMEDIATE), signatures and X.509 from our OpenSSL (ECDSA, RSA, EdDSA, ML-DSA), vici (pqbench drives it
# over its socket), the kernel's netlink interface (addresses; no CHILD_SA is installed: pqbench's IKE_SAs are
# childless, RFC 6023) and the default UDP socket. It links our OpenSSL 3.5 and finds it through a relative
# rpath, as nginx-h3 does. The pid directory is compiled in; each charon runs in a mount namespace of its own
# with a tmpfs there (pqbench.endpoints.strongswan.charon), so many run side by side.

STRONGSWAN_VERSION=6.1.0
STRONGSWAN_SHA256=fe6c97481298767213cfc2e9a1da29fdd8018d481ff4cb9cf0283099654f20d4
STRONGSWAN_PIDDIR=/run/pqbench/strongswan
STRONGSWAN_CONFIGURE=(--disable-defaults --enable-monolithic --enable-static --disable-shared --enable-charon
    --enable-ikev2 --enable-vici --enable-kernel-netlink --enable-socket-default --enable-nonce --enable-random
    --enable-openssl --enable-ml --enable-x509 --enable-pubkey --enable-pem --enable-pkcs1 --enable-pkcs8
    --enable-constraints --enable-sha2 --enable-hmac --enable-kdf --enable-drbg
    --with-piddir=$STRONGSWAN_PIDDIR)
STRONGSWAN_APT=(build-essential pkg-config bzip2)
# The OpenSSL recipe is part of ours: charon compiles against its headers.
STRONGSWAN_RECIPE=$(recipe_hash "$STRONGSWAN_VERSION" "$STRONGSWAN_SHA256" "${STRONGSWAN_CONFIGURE[@]}" \
                    "$OPENSSL_VERSION" "$OPENSSL_RECIPE" "rpath-origin-1")

do_strongswan() {
    local dest=$BUILD/strongswan name=strongswan-$STRONGSWAN_VERSION-$STRONGSWAN_RECIPE
    if is_done "$dest" "$STRONGSWAN_RECIPE"; then step strongswan "$STRONGSWAN_VERSION (built)"; return; fi
    if restore_from_cache "$name" "$dest"; then step strongswan "$STRONGSWAN_VERSION (from cache $CACHE/$name)"; return; fi
    is_done "$BUILD/openssl" "$OPENSSL_RECIPE" || die "strongSwan links our OpenSSL, which is not built: run \`make\` first"
    apt_install "${STRONGSWAN_APT[@]}"
    step strongswan "fetching strongSwan $STRONGSWAN_VERSION source from Debian's archive"
    local tarball src
    tarball=$(debian_fetch "pool/main/s/strongswan/strongswan_$STRONGSWAN_VERSION.orig.tar.bz2" "$STRONGSWAN_SHA256" \
              strongswan-fetch scripts/build-ike.sh)
    src=$BUILD/src/strongswan-$STRONGSWAN_VERSION
    rm -rf "$src" "$dest" && mkdir -p "$BUILD/src" && tar -xjf "$tarball" -C "$BUILD/src"
    [ -x "$src/configure" ] || die "$tarball is not a strongSwan release tree (no configure)"
    : >"$LOGS/strongswan.log"  # this build's log alone
    step strongswan "building strongSwan $STRONGSWAN_VERSION on OpenSSL $OPENSSL_VERSION (about 2.5 min on 2 cores; log: $LOGS/strongswan.log)"
    # charon is installed in $dest/libexec/ipsec: our OpenSSL is three directories up and across
    (cd "$src" && logged strongswan ./configure --prefix="$dest" --sysconfdir="$dest/etc" "${STRONGSWAN_CONFIGURE[@]}" \
        CPPFLAGS="-I$BUILD/openssl/include" LDFLAGS="-L$BUILD/openssl/lib" \
        && LD_RUN_PATH='$ORIGIN/../../../openssl/lib' logged strongswan make -j"$JOBS" \
        && logged strongswan make install) \
        || die "strongSwan $STRONGSWAN_VERSION did not build on our OpenSSL (log: $LOGS/strongswan.log)"
    local charon=$dest/libexec/ipsec/charon
    [ -x "$charon" ] || die "the strongSwan build installed no charon at $charon"
    readelf -d "$charon" | grep -q 'R.*PATH.*\[\$ORIGIN/../../../openssl/lib\]' \
        || die "the built charon does not look for our OpenSSL beside it (no \$ORIGIN rpath)"
    local missing
    missing=$(ldd "$charon" | awk '/not found/ {print $1}' | tr '\n' ' ')
    [ -z "$missing" ] || die "the built charon lacks libraries: $missing"
    rm -rf "$dest/share" "$dest/etc"  # its example configs are never used: each charon gets its own
    cat >"$dest/PROVENANCE.json" <<EOF2
{"name": "strongswan", "version": "$STRONGSWAN_VERSION", "source": "Debian's archive, source package strongswan (upstream orig tarball)",
 "tarball": "$(basename "$tarball")", "sha256": "$STRONGSWAN_SHA256", "openssl": "$OPENSSL_VERSION",
 "configure": "${STRONGSWAN_CONFIGURE[*]}"}
EOF2
    echo "$STRONGSWAN_VERSION $STRONGSWAN_RECIPE" >"$dest/.done"
    save_to_cache "$name" "$dest"
    rm -rf "$src"
    step strongswan "strongSwan $STRONGSWAN_VERSION built into $dest"
}
