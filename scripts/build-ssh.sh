# SSH parts of the build. Sourced by scripts/build.sh after its helpers (step, logged, die, recipe_hash,
# is_done, restore_from_cache, save_to_cache, debian_fetch, ROOT, BUILD, CACHE) and after
# scripts/build-go.sh (go_build_module); not run on its own.
#   do_openssh   OpenSSH 10 binaries from Debian's archive (bookworm-backports) -> build/openssh
#   do_sshgo     native/sshgo (sshtimer, sshserver) -> build/sshgo/bin
#
# OpenSSH: the binary packages openssh-server and openssh-client of bookworm-backports (and libwrap0,
# which sshd-session links and this image may lack), fetched as files from the pool of Debian's archive
# (the mirror this machine's apt uses), checked against the sha256 pinned below and unpacked with
# dpkg-deb -x under build/openssh. Nothing is installed: the machine's packages, its sshd, its accounts
# and /etc stay as they are. pqbench runs sshd only inside a testbed's server namespace, with its own
# config (pqbench.endpoints.openssh).

OPENSSH_DEB_VERSION=1:10.0p1-7~bpo12+1
OPENSSH_DEBS=(  # pool path | sha256
    "pool/main/o/openssh/openssh-server_10.0p1-7~bpo12+1_amd64.deb|b773deb955342131cbe0bc254421fcd5ff4c39ee2db8dfd4f98ac53fa07b75a4"
    "pool/main/o/openssh/openssh-client_10.0p1-7~bpo12+1_amd64.deb|8de7af71a08bd3ffec0f00621d7389fb53194245689ece0e0d1e92fe30e5caa5"
    "pool/main/t/tcp-wrappers/libwrap0_7.6.q-32_amd64.deb|cbce2669a3ba4d74cfdc52b14f38014893e23d85a33d109a3422c342eefc55f8"
)
OPENSSH_RECIPE=$(recipe_hash "$OPENSSH_DEB_VERSION" "${OPENSSH_DEBS[@]}" "layout-1")

do_openssh() {
    local dest=$BUILD/openssh name=openssh-${OPENSSH_DEB_VERSION#*:}-$OPENSSH_RECIPE
    name=${name//\~/_}
    if is_done "$dest" "$OPENSSH_RECIPE"; then step openssh "$OPENSSH_DEB_VERSION (unpacked)"; return; fi
    if restore_from_cache "$name" "$dest"; then step openssh "$OPENSSH_DEB_VERSION (from cache $CACHE/$name)"; return; fi
    [ "$(dpkg --print-architecture)" = amd64 ] || die "the pinned OpenSSH packages are for amd64, this machine is $(dpkg --print-architecture)"
    step openssh "fetching openssh $OPENSSH_DEB_VERSION (bookworm-backports) from Debian's archive"
    rm -rf "$dest" && mkdir -p "$dest/root"
    local entry deb sums=()
    for entry in "${OPENSSH_DEBS[@]}"; do
        deb=$(debian_fetch "${entry%%|*}" "${entry##*|}" openssh-fetch scripts/build-ssh.sh)
        logged openssh dpkg-deb -x "$deb" "$dest/root"
        sums+=("{\"file\": \"$(basename "$deb")\", \"sha256\": \"${entry##*|}\"}")
    done
    mkdir -p "$dest/lib"
    cp -a "$dest/root"/lib/x86_64-linux-gnu/libwrap.so.0* "$dest/root"/usr/lib/x86_64-linux-gnu/libwrap.so.0* \
        "$dest/lib/" 2>/dev/null || true
    local missing
    missing=$(for b in usr/sbin/sshd usr/lib/openssh/sshd-session usr/lib/openssh/sshd-auth usr/bin/ssh usr/bin/ssh-keygen; do
                  LD_LIBRARY_PATH=$dest/lib ldd "$dest/root/$b" | awk '/not found/ {print $1}'
              done | sort -u | tr '\n' ' ')
    [ -z "$missing" ] || die "OpenSSH $OPENSSH_DEB_VERSION needs libraries this machine lacks: $missing(install their Debian packages)"
    local version
    version=$(LD_LIBRARY_PATH=$dest/lib "$dest/root/usr/bin/ssh" -V 2>&1)
    cat >"$dest/PROVENANCE.json" <<EOF
{"name": "openssh", "version": "$OPENSSH_DEB_VERSION", "reports": "$version",
 "source": "Debian's archive, bookworm-backports binary packages (unpacked, not installed)",
 "packages": [$(IFS=,; echo "${sums[*]}")]}
EOF
    echo "$OPENSSH_DEB_VERSION $OPENSSH_RECIPE" >"$dest/.done"
    save_to_cache "$name" "$dest"
    step openssh "$version unpacked into $dest/root"
}

do_sshgo() { go_build_module sshgo "$ROOT/native/sshgo"; }
