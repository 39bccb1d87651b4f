# nginx with HTTP/3: the openssl stack's QUIC server. Sourced by scripts/build.sh after its helpers (step,
# logged, die, recipe_hash, is_done, restore_from_cache, save_to_cache, apt_install, debian_fetch, ROOT,
# BUILD, CACHE, JOBS, OPENSSL_VERSION, OPENSSL_RECIPE); not run on its own.
#   do_nginx-h3   nginx 1.26 (Debian trixie's source) with http_v3, on our OpenSSL -> build/nginx-h3/sbin/nginx
#
# Debian's nginx-light (the TCP server) has no HTTP/3, so this one is compiled from the upstream tarball
# that Debian trixie's nginx source package carries, pinned by sha256. It links our OpenSSL under
# build/openssl and finds it at run time through a relative rpath ($ORIGIN/../../openssl/lib), so a copy
# restored from the machine cache into another clone runs on that clone's OpenSSL, never on Debian's.
#
# QUIC with OpenSSL: nginx 1.26 knows BoringSSL's QUIC API (SSL_set_quic_method), which OpenSSL does not
# have, and not OpenSSL 3.5's own QUIC TLS API (nginx 1.29 added it). So it uses its OpenSSL compatibility
# layer (src/event/quic/ngx_event_quic_openssl_compat.c, configure says "OpenSSL QUIC compatibility"):
# TLS runs as over TCP into a memory BIO, a message callback lifts each handshake message out of its
# record into QUIC CRYPTO frames, the keylog callback hands nginx the traffic secrets, and the transport
# parameters travel as a custom extension (0x39, which OpenSSL 3.5.7 leaves to custom extensions). What
# that means here: no 0-RTT (the layer sets max_early_data to 0, so a QUIC site refuses early_data),
# keylog is taken by nginx (no SSLKEYLOGFILE), and the server's TLS messages reach QUIC one message at a
# time as OpenSSL writes them (what a handshake puts on the wire is unchanged: the same flights, the same
# chain, the same groups, negotiated by our OpenSSL with pqprov).
#
# Only what a static HTTPS/HTTP3 server needs is compiled: no rewrite (so no PCRE), no gzip, no proxies
# or upstream balancers, so build-essential (core) is all the step needs from Debian.

NGINX_H3_VERSION=1.26.3
NGINX_H3_SHA256=69ee2b237744036e61d24b836668aad3040dda461fe6f570f1787eab570c75aa
NGINX_H3_CONFIGURE=(--with-http_ssl_module --with-http_v3_module --without-pcre
    --without-http_rewrite_module --without-http_gzip_module --without-http_proxy_module
    --without-http_fastcgi_module --without-http_uwsgi_module --without-http_scgi_module
    --without-http_grpc_module --without-http_memcached_module --without-http_ssi_module
    --without-http_charset_module --without-http_userid_module --without-http_auth_basic_module
    --without-http_autoindex_module --without-http_geo_module --without-http_map_module
    --without-http_split_clients_module --without-http_referer_module --without-http_mirror_module
    --without-http_empty_gif_module --without-http_browser_module --without-http_limit_conn_module
    --without-http_limit_req_module --without-http_access_module --without-http_upstream_hash_module
    --without-http_upstream_ip_hash_module --without-http_upstream_least_conn_module
    --without-http_upstream_random_module --without-http_upstream_keepalive_module
    --without-http_upstream_zone_module)
NGINX_H3_APT=(build-essential)
# The OpenSSL recipe is part of ours: nginx compiles against its headers.
NGINX_H3_RECIPE=$(recipe_hash "$NGINX_H3_VERSION" "$NGINX_H3_SHA256" "${NGINX_H3_CONFIGURE[@]}" \
                  "$OPENSSL_VERSION" "$OPENSSL_RECIPE" "rpath-origin-1")

do_nginx-h3() {
    local dest=$BUILD/nginx-h3 name=nginx-h3-$NGINX_H3_VERSION-$NGINX_H3_RECIPE
    if is_done "$dest" "$NGINX_H3_RECIPE"; then step nginx-h3 "$NGINX_H3_VERSION (built)"; return; fi
    if restore_from_cache "$name" "$dest"; then step nginx-h3 "$NGINX_H3_VERSION (from cache $CACHE/$name)"; return; fi
    is_done "$BUILD/openssl" "$OPENSSL_RECIPE" || die "nginx-h3 links our OpenSSL, which is not built: run \`make\` first"
    apt_install "${NGINX_H3_APT[@]}"
    step nginx-h3 "fetching nginx $NGINX_H3_VERSION source (trixie's) from Debian's archive"
    local tarball src
    tarball=$(debian_fetch "pool/main/n/nginx/nginx_$NGINX_H3_VERSION.orig.tar.gz" "$NGINX_H3_SHA256" nginx-h3-fetch \
              scripts/build-nginx-h3.sh)
    src=$BUILD/src/nginx-$NGINX_H3_VERSION
    rm -rf "$src" "$dest" && mkdir -p "$BUILD/src" && tar -xzf "$tarball" -C "$BUILD/src"
    [ -f "$src/src/event/quic/ngx_event_quic_openssl_compat.c" ] || die "$tarball has no QUIC sources"
    : >"$LOGS/nginx-h3.log"  # this build's log alone
    step nginx-h3 "building nginx $NGINX_H3_VERSION with HTTP/3 on OpenSSL $OPENSSL_VERSION (about 1 min; log: $LOGS/nginx-h3.log)"
    # The rpath reaches the linker through LD_RUN_PATH (used when no -rpath is given): $ORIGIN in
    # --with-ld-opt would pass through configure's shell, the Makefile and nginx's -V string literal.
    (cd "$src" && logged nginx-h3 ./configure --prefix="$dest" "${NGINX_H3_CONFIGURE[@]}" \
        --with-cc-opt="-O2 -I$BUILD/openssl/include" --with-ld-opt="-L$BUILD/openssl/lib" \
        && grep -q '^#define NGX_QUIC_OPENSSL_COMPAT  *1' objs/ngx_auto_config.h \
        && LD_RUN_PATH='$ORIGIN/../../openssl/lib' logged nginx-h3 make -j"$JOBS" \
        && logged nginx-h3 make install) \
        || die "nginx $NGINX_H3_VERSION did not build with QUIC on our OpenSSL (log: $LOGS/nginx-h3.log)"
    readelf -d "$dest/sbin/nginx" | grep -q 'R.*PATH.*\[\$ORIGIN/../../openssl/lib\]' \
        || die "the built nginx does not look for our OpenSSL beside it (no \$ORIGIN rpath)"
    local v
    v=$("$dest/sbin/nginx" -V 2>&1) || die "the built nginx does not run: $v"
    # nginx adds "(running with OpenSSL X)" only when the library it loaded is not the one it was built with
    { grep -q "built with OpenSSL $OPENSSL_VERSION " <<<"$v" && ! grep -q "running with OpenSSL" <<<"$v"; } \
        || die "the built nginx is not on our OpenSSL $OPENSSL_VERSION: $v"
    rm -rf "$dest/html" "$dest/logs" "$dest/conf"  # its own config and pages are never used: each run writes its own
    cat >"$dest/PROVENANCE.json" <<EOF
{"name": "nginx-h3", "version": "$NGINX_H3_VERSION", "source": "Debian's archive, source package nginx (trixie; upstream orig tarball)",
 "tarball": "$(basename "$tarball")", "sha256": "$NGINX_H3_SHA256", "openssl": "$OPENSSL_VERSION",
 "quic": "nginx's OpenSSL compatibility layer (no 0-RTT)", "configure": "${NGINX_H3_CONFIGURE[*]}"}
EOF
    echo "$NGINX_H3_VERSION $NGINX_H3_RECIPE" >"$dest/.done"
    save_to_cache "$name" "$dest"
    rm -rf "$src"
    step nginx-h3 "nginx $NGINX_H3_VERSION with HTTP/3 built into $dest/sbin"
}
