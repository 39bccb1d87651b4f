"""What the built charon can do, asked of it once per build: a charon started in a network namespace of its own
(it reaches nothing, nothing reaches it) lists its key exchange methods over vici, and is given a certificate and
key of each signature family the catalog has on OpenSSL (made as the cells' chains are): those it parses and loads
are what its servers can prove themselves with. Kept in build/strongswan/capabilities.json, keyed by the binary."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

from pqbench.algorithms import catalog, certs
from pqbench.endpoints.strongswan import build
from pqbench.endpoints.strongswan.charon import Charon

# One certificate per family: strongSwan's OpenSSL plugin parses a family's keys or none of them
FAMILIES = {"RSA": "rsa2048", "ED25519": "ed25519", "ED448": "ed448", "ML-DSA": "mldsa44", "SLH-DSA": "slhdsasha2128f"}


def family_probe(sig: str) -> str | None:
    """The signature whose probe answers for sig (ECDSA: each curve its own), None for one not on OpenSSL."""
    alg = catalog.find(sig, "sig")
    if alg.source != "openssl":
        return None
    if (alg.keytype or "") == "EC":
        return alg.name
    return next((probe for prefix, probe in FAMILIES.items() if (alg.keytype or alg.name).upper().startswith(prefix)),
                alg.name)


def probe_sigs() -> list[str]:
    return sorted({p for a in catalog.algorithms("sig") if (p := family_probe(a.name))})


def ask() -> dict:
    """{"ke": [strongSwan's key exchange methods], "sigs": {probe signature: None or why not}}."""
    work = Path(tempfile.mkdtemp(prefix="pqbench-strongswan-probe-"))
    charon = Charon(work / "charon")
    try:
        charon.start(isolated=True)
        with charon.session() as vici:
            ke = [str(k) for k in (vici.get_algorithms().get("ke") or [])]
            sigs = {}
            for sig in probe_sigs():
                try:
                    chain = certs.make_chain(sig, work / sig)
                    vici.load_cert({"type": "X509", "flag": "NONE", "data": chain.leaf_cert.read_bytes()})
                    vici.load_key({"type": "any", "data": chain.leaf_key.read_bytes()})
                    sigs[sig] = None
                except Exception as e:  # noqa: BLE001  (charon's refusal, in its words, is the reason)
                    sigs[sig] = str(e).removeprefix("Command failed: ")
        return {"ke": ke, "sigs": sigs}
    finally:
        charon.stop()
        shutil.rmtree(work, ignore_errors=True)


def capabilities() -> dict | None:
    """ask()'s answer for the built charon (from the file when it was asked of this binary), None when not built."""
    binary = build.charon()
    if not binary.exists():
        return None
    st = binary.stat()
    stamp = f"{st.st_size}-{st.st_mtime_ns}"
    kept = build.home() / "capabilities.json"
    with contextlib.suppress(OSError, ValueError):
        got = json.loads(kept.read_text())
        if got.get("stamp") == stamp:
            return got
    got = {"stamp": stamp, **ask()}
    with contextlib.suppress(OSError):
        kept.write_text(json.dumps(got, indent=1))
    return got
