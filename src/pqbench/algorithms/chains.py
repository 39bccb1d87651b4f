"""Certificate chains as deployed and as proposed (docs/chains.md): the shapes a cell's `chain` axis names and
the padded chains of its `chain_bytes` axis, made with our OpenSSL and taken apart byte by byte.

- webpki: what a browser meets today. The server sends the leaf and one intermediate (the root stays with the
  client); the leaf carries an embedded list of two SCTs (RFC 6962 §3.3), each signed over the leaf's
  precertificate TBS by a log key of the chain's own algorithm.
- webpki-ocsp: the same with a stapled OCSP response signed by the issuer (RFC 6960; needs a server and a client
  that staple: the `ocsp_stapling` feature).
- suppressed: the webpki leaf alone; the client already has the intermediate (in its trust file), as intermediate
  suppression proposes. A real chain, verified normally.
- mtc-standalone, mtc-landmark: a real Merkle Tree Certificate (draft-ietf-plants-merkle-tree-certs-07) from
  pqbench's MTC CA (pqbench.algorithms.mtc), sent alone; only a client that verifies MTCs can meet it (the
  mtc_verify feature: rustls, with the `mtcs` crate) and a server that sends it (mtc_serve: nginx, rustls).
- mtc-standalone-size, mtc-landmark-size, abridged: the proposed shapes as **size-only** stand-ins, for every
  other client: a root → leaf chain whose leaf is padded so that the server sends exactly the bytes the proposal
  would (sizes from the algorithm's key and signature sizes and the drafts' structures: stand_in_bytes). Stores
  from before the real MTCs named these mtc-standalone and mtc-landmark; they open renamed (store migration 15).

A padded chain (chain_bytes N, or a stand-in) is root → leaf (the leaf's key of the cell's algorithm, which signs
the handshake; the root Ed25519, the smallest signature, so that small sizes are reachable) with a non-critical extension of filler (an OID
under the UUID arc 2.25, which no client knows and every client ignores), sized so that the DER of the
certificates sent is N bytes exactly. Clients verify it as any chain.

Every chain's parts are counted from its DER (parts): public keys, certificate signatures, SCT lists (their
signatures apart), the OCSP response, padding, and the X.509 framing that remains.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import shutil
import struct
import zlib
from pathlib import Path

from asn1crypto import core, ocsp

from pqbench.algorithms import catalog, mtc
from pqbench.algorithms.der import content, elements, header
from pqbench.algorithms.certs import (DEFAULT_SERVER_NAME, EXTENSIONS, Chain, _check_signer, _new_key, _openssl,
                                      _prepare_out, make_chain, sign)
from pqbench.errors import BadInput, MeasurementFailed

SCT_LIST_OID = "1.3.6.1.4.1.11129.2.4.2"  # RFC 6962 §3.3: embedded SCT list
PAD_OID = "2.25.219656358152305736766829961545470305023"  # UUID arc: pqbench's filler extension (size-only)
LOGS = 2  # SCTs per leaf (Chrome's policy asks two for certificates of up to 180 days)
PROOF_HASH = 32  # SHA-256 node of a Merkle inclusion proof
STAND_IN_CA = "ed25519"  # the issuer of a stand-in's leaf: the smallest signature, so any target fits
ABRIDGE_ID = 3  # draft-ietf-tls-cert-abridge pass 1: an intermediate becomes a 3-byte identifier
MIN_PADDED = 500  # below this no padded chain exists (a root → leaf certificate is larger)
LEAF_FRAMING_MAX = 450  # a padded leaf's bytes beyond its key and its issuer's signature (≈ 370 measured) and filler
MAX_PADDED = 200_000


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    what: str
    size_only: bool = False  # a stand-in: padded to the proposal's bytes, not the proposal itself
    staple: bool = False  # needs OCSP stapling of the server and the client
    mtc: str | None = None  # a real Merkle Tree Certificate of this kind (pqbench.algorithms.mtc.KINDS)


SHAPES = {s.name: s for s in (
    Shape("webpki", "leaf + intermediate sent, two embedded SCTs"),
    Shape("webpki-ocsp", "leaf + intermediate sent, two embedded SCTs, stapled OCSP response", staple=True),
    Shape("suppressed", "webpki leaf alone: the client has the intermediate (intermediate suppression)"),
    Shape("mtc-standalone", "Merkle Tree Certificate, standalone: two cosignatures", mtc="standalone"),
    Shape("mtc-landmark", "Merkle Tree Certificate, landmark-relative: no signature", mtc="landmark"),
    Shape("mtc-standalone-size", "Merkle Tree Certificate, standalone (size-only)", size_only=True),
    Shape("mtc-landmark-size", "Merkle Tree Certificate, landmark-relative (size-only)", size_only=True),
    Shape("abridged", "abridged webpki chain, draft-ietf-tls-cert-abridge (size-only)", size_only=True),
)}


def parse_shape(field: str, value) -> str:
    if value not in SHAPES:
        raise BadInput(field, f"{value!r} is not a chain shape (allowed: {', '.join(SHAPES)})")
    return value


def label(shape: str | None, nbytes: int | None) -> str | None:
    """How a cell's chain reads in progress lines and the report ("size-only" on every stand-in)."""
    if shape:
        return f"chain {shape}" + (" (size-only)" if SHAPES[shape].size_only else "")
    if nbytes:
        return f"chain {nbytes} B (size-only)"
    return None


# --- sizes of the proposed shapes --------------------------------------------------------------------------

def stand_in_bytes(shape: str, sig: str, webpki: Chain) -> dict:
    """What the server's certificates of a proposed shape weigh for algorithm sig: {"bytes", "formula",
    "keys_and_signatures"}. keys_and_signatures counts the handshake's whole authentication (with the
    CertificateVerify signature, as the published figures do); bytes is what the Certificate message carries
    (without it), which the padded stand-in sends. Framing comes from a real leaf of the algorithm
    (webpki: its webpki chain, made by make_webpki)."""
    alg = catalog.find(sig, "sig", field="sig")
    pk, s = alg.pk, alg.sig or 0
    webpki_parts = webpki.parts
    leaf = webpki_parts["certificates"][0]
    framing = leaf["framing"]
    if shape == "mtc-standalone-size":
        # draft-ietf-plants-merkle-tree-certs: the subject key, an inclusion proof to a subtree and the
        # signatures of two cosigners over that subtree in place of the CA's signature
        proof = 12 * PROOF_HASH
        cert = framing + pk + 2 * s + proof
        return {"bytes": cert, "keys_and_signatures": pk + 3 * s + proof,
                "formula": f"framing {framing} + pk {pk} + 2 cosignatures × {s} + 12 proof hashes × {PROOF_HASH}"}
    if shape == "mtc-landmark-size":
        # landmark-relative: the client already trusts the landmark subtree's root; the proof alone vouches
        proof = 23 * PROOF_HASH
        cert = framing + pk + proof
        return {"bytes": cert, "keys_and_signatures": pk + s + proof,
                "formula": f"framing {framing} + pk {pk} + 23 proof hashes × {PROOF_HASH}"}
    if shape == "abridged":
        # pass 1: the intermediate becomes its 3-byte identifier; pass 2: the leaf compressed (zlib here, not the
        # draft's zstd dictionary: an upper bound; keys, signatures and SCT signatures do not compress)
        leaf_der = pem_ders(webpki.leaf_cert.read_text())[0]
        packed = len(zlib.compress(leaf_der, 9))
        ints = len(webpki_parts["certificates"]) - 1
        return {"bytes": ABRIDGE_ID * ints + packed,
                "keys_and_signatures": pk + (2 + LOGS) * s,
                "formula": f"{ints} intermediate × {ABRIDGE_ID} B identifier + zlib(leaf {len(leaf_der)} B) {packed}"}
    raise BadInput("chain", f"{shape!r} has no stand-in size")


# --- taking a chain apart ----------------------------------------------------------------------------------

def _bits(value) -> int:
    """Bytes of a BIT STRING's content (without its unused-bits byte)."""
    return len(value.contents) - 1


class _Cert:
    """A certificate's raw parts, read by DER alone: asn1crypto would parse (and fail on) the post-quantum keys
    it does not know."""

    def __init__(self, der: bytes):
        self.tbs, self.sigalg, self.signature = elements(der)
        fields = elements(self.tbs)
        self.spki = fields[6 if fields[0][0] == 0xA0 else 5]
        self.extensions_field = fields[-1] if fields[-1][0] == 0xA3 else None

    def extensions(self) -> list[tuple[str, bytes, bytes]]:
        """(OID, the extension's value, the extension's raw bytes) of each extension."""
        if self.extensions_field is None:
            return []
        seq = content(self.extensions_field)
        out = []
        for ext in elements(seq):
            parts = elements(ext)
            out.append((core.ObjectIdentifier.load(parts[0]).dotted, content(parts[-1]), ext))
        return out

    @property
    def key_bytes(self) -> int:
        """The SubjectPublicKeyInfo's key: its BIT STRING without the unused-bits byte."""
        return len(content(elements(self.spki)[1])) - 1

    @property
    def signature_bytes(self) -> int:
        return len(content(self.signature)) - 1


def sct_list(ext_value: bytes) -> list[dict]:
    """The SCTs of an embedded SCT list (the extension's value, an OCTET STRING around the TLS list)."""
    raw = core.OctetString.load(ext_value).native
    total = struct.unpack(">H", raw[:2])[0]
    body, out, i = raw[2:2 + total], [], 0
    while i < len(body):
        n = struct.unpack(">H", body[i:i + 2])[0]
        sct = body[i + 2:i + 2 + n]
        ext_len = struct.unpack(">H", sct[41:43])[0]
        at = 43 + ext_len
        sig_len = struct.unpack(">H", sct[at + 2:at + 4])[0]
        out.append({"version": sct[0], "log_id": sct[1:33], "timestamp": struct.unpack(">Q", sct[33:41])[0],
                    "extensions": sct[43:43 + ext_len], "scheme": sct[at:at + 2],
                    "signature": sct[at + 4:at + 4 + sig_len], "bytes": n + 2})
        i += 2 + n
    return out


def cert_parts(der: bytes) -> dict:
    """One certificate's bytes by part; they add up to its DER."""
    cert = _Cert(der)
    pk, sig = cert.key_bytes, cert.signature_bytes
    scts = sct_sigs = padding = proof = 0
    if cert.sigalg == mtc.PROOF_ALGORITHM:  # a Merkle Tree Certificate: its MTCProof in place of a signature
        proof, cosignatures = mtc.proof_sizes(content(cert.signature)[1:])
        sig = sum(cosignatures)
    for oid, value, raw in cert.extensions():
        if oid == SCT_LIST_OID:
            scts = len(value)
            sct_sigs = sum(len(s["signature"]) for s in sct_list(value))
        elif oid == PAD_OID:
            padding = len(raw)
    return {"der": len(der), "public_key": pk, "signature": sig, "scts": scts, "sct_signatures": sct_sigs,
            "padding": padding, "mtc_proof": proof, "framing": len(der) - pk - sig - scts - padding - proof}


def parts(chain: Chain) -> dict:
    """The bytes the server sends, by part: per certificate sent (leaf first) and in total, with the stapled
    OCSP response (its signature apart) where the chain has one."""
    certs = [cert_parts(der) for der in pem_ders(chain.chain_file.read_text())]
    total = {k: sum(c[k] for c in certs) for k in ("der", "public_key", "signature", "scts", "sct_signatures",
                                                  "padding", "mtc_proof", "framing")}
    out = {"certificates": certs, "sent": total["der"], "public_keys": total["public_key"],
           "signatures": total["signature"], "scts": total["scts"], "sct_signatures": total["sct_signatures"],
           "padding": total["padding"], "mtc_proof": total["mtc_proof"], "framing": total["framing"], "ocsp": 0,
           "ocsp_signature": 0}
    ocsp_file = chain.directory / "ocsp.der"
    if ocsp_file.exists():
        raw = ocsp_file.read_bytes()
        basic = ocsp.OCSPResponse.load(raw)["response_bytes"]["response"].parsed
        out["ocsp"], out["ocsp_signature"] = len(raw), _bits(basic["signature"])
    return out


def pem_ders(text: str) -> list[bytes]:
    """The DER of each certificate in a PEM text, in order."""
    from asn1crypto import pem
    return [der for _, _, der in pem.unarmor(text.encode(), multiple=True)]


# --- making chains -----------------------------------------------------------------------------------------

class _Maker:
    """Keys and certificates in one directory, issued with fixed serials and dates (so a certificate issued
    twice, before and after its SCTs, differs only by them)."""

    def __init__(self, out: Path, server_name: str):
        self.out, self.server_name = out, server_name
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.not_before = (now - datetime.timedelta(days=1)).strftime("%Y%m%d%H%M%SZ")
        self.not_after = (now + datetime.timedelta(days=90)).strftime("%Y%m%d%H%M%SZ")
        (out / "extensions.cnf").write_text(EXTENSIONS.format(server_name=server_name))

    def leaf_section(self, name: str, more: str) -> str:
        """A section of its own: the leaf's extensions and more."""
        leaf = EXTENSIONS.format(server_name=self.server_name).split("[leaf]\n")[1].split("\n[")[0]
        return f"[{name}]\n" + leaf.rstrip("\n") + "\n" + more

    def key(self, name: str, alg: catalog.Algorithm) -> Path:
        _new_key(alg, self.out / f"{name}.key")
        return self.out / f"{name}.key"

    def root(self, alg: catalog.Algorithm) -> None:
        self.key("root", alg)
        _openssl(["req", "-x509", "-new", "-key", str(self.out / "root.key"), "-subj",
                  f"/O=pqbench/CN=pqbench root CA ({alg.name})", "-days", "3650",
                  "-config", str(self.out / "extensions.cnf"), "-extensions", "ca",
                  "-out", str(self.out / "root.crt")], "make the root certificate")

    def issue(self, name: str, subject: str, section: str, parent: str, serial: int, extra: str = "") -> bytes:
        """Issues name.crt from name.key, signed by parent; extra: more extension lines of the section."""
        ext = self.out / f"{name}.ext"
        base = (self.out / "extensions.cnf").read_text()
        ext.write_text(base + "\n" + extra if extra else base)
        csr = _openssl(["req", "-new", "-key", str(self.out / f"{name}.key"), "-subj", subject,
                        "-config", str(self.out / "extensions.cnf")], f"make the {name} request")
        _openssl(["x509", "-req", "-CA", str(self.out / f"{parent}.crt"), "-CAkey", str(self.out / f"{parent}.key"),
                  "-set_serial", str(serial), "-not_before", self.not_before, "-not_after", self.not_after,
                  "-extfile", str(ext), "-extensions", section, "-out", str(self.out / f"{name}.crt"),
                  "-outform", "PEM"], f"sign the {name} certificate", input=csr)
        ext.unlink()
        return pem_ders((self.out / f"{name}.crt").read_text())[0]


def _serial() -> int:
    return int.from_bytes(os.urandom(8), "big") >> 1


def _spki(der: bytes) -> bytes:
    return _Cert(der).spki


def precert_signed_data(timestamp_ms: int, issuer_spki: bytes, tbs: bytes, extensions: bytes = b"") -> bytes:
    """What a log signs for an SCT of a precertificate (RFC 6962 §3.2): version v1, certificate_timestamp,
    the timestamp, precert_entry, the issuer key's SHA-256 and the TBS, and the SCT's extensions."""
    return (b"\x00\x00" + struct.pack(">Q", timestamp_ms) + b"\x00\x01" + hashlib.sha256(issuer_spki).digest()
            + len(tbs).to_bytes(3, "big") + tbs + struct.pack(">H", len(extensions)) + extensions)


def strip_extension(der: bytes, oid: str) -> bytes:
    """A certificate's TBS without one extension (a final certificate's TBS back to its precertificate's),
    rebuilt from the original bytes."""
    cert = _Cert(der)
    tail = cert.extensions_field
    if tail is None or not cert.tbs.endswith(tail):
        raise MeasurementFailed("the certificate has no extensions to strip")
    kept = b"".join(raw for o, _, raw in cert.extensions() if o != oid)
    seq = header(0x30, len(kept)) + kept
    body = content(cert.tbs)[:-len(tail)] + header(0xA3, len(seq)) + seq
    return header(0x30, len(body)) + body


def precert_tbs(der: bytes) -> bytes:
    return _Cert(der).tbs


def _scheme(alg: catalog.Algorithm) -> bytes:
    """The SCT's SignatureAndHashAlgorithm: the TLS 1.3 scheme code point of the log's algorithm."""
    return struct.pack(">H", alg.codepoint or 0)


def _make_logs(mk: _Maker, alg: catalog.Algorithm) -> list[dict]:
    logs = []
    for i in range(1, LOGS + 1):
        key = mk.key(f"log{i}", alg)
        pub = mk.out / f"log{i}.pub"
        _openssl(["pkey", "-in", str(key), "-pubout", "-out", str(pub)], f"write log {i}'s public key")
        spki = _openssl(["pkey", "-in", str(key), "-pubout", "-outform", "DER"], f"read log {i}'s public key")
        logs.append({"key": key, "pub": pub, "log_id": hashlib.sha256(spki).digest()})
    return logs


def _sct_extension(logs: list[dict], alg: catalog.Algorithm, issuer_der: bytes, precert_tbs: bytes) -> str:
    """The extension line carrying the SCT list signed by the logs over the precertificate."""
    items = b""
    now_ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    for log in logs:
        signature = sign(log["key"], precert_signed_data(now_ms, _spki(issuer_der), precert_tbs))
        sct = (b"\x00" + log["log_id"] + struct.pack(">Q", now_ms) + b"\x00\x00" + _scheme(alg)
               + struct.pack(">H", len(signature)) + signature)
        items += struct.pack(">H", len(sct)) + sct
    value = core.OctetString(struct.pack(">H", len(items)) + items).dump()
    return f"{SCT_LIST_OID} = DER:{value.hex(':')}\n"


def _ocsp_response(mk: _Maker, issuer: str, leaf: str, serial: int) -> None:
    """ocsp.der: a good-status response for the leaf, signed by its issuer (what a server staples)."""
    out = mk.out
    expiry = mk.not_after[2:]  # the index's YYMMDDHHMMSSZ
    (out / "ocsp-index.txt").write_text(f"V\t{expiry}\t\t{serial:X}\tunknown\t/O=pqbench/CN={mk.server_name}\n")
    _openssl(["ocsp", "-issuer", str(out / f"{issuer}.crt"), "-cert", str(out / f"{leaf}.crt"), "-no_nonce",
              "-reqout", str(out / "ocsp-request.der")], "make the OCSP request")
    _openssl(["ocsp", "-index", str(out / "ocsp-index.txt"), "-rsigner", str(out / f"{issuer}.crt"),
              "-rkey", str(out / f"{issuer}.key"), "-CA", str(out / f"{issuer}.crt"), "-reqin",
              str(out / "ocsp-request.der"), "-respout", str(out / "ocsp.der"), "-ndays", "7"],
             "sign the OCSP response")


def make_webpki(sig: str, out: Path, *, staple: bool = False, suppressed: bool = False,
                server_name: str = DEFAULT_SERVER_NAME, root_sig: str | None = None,
                intermediate_sig: str | None = None) -> Chain:
    """root → intermediate → leaf of one algorithm, or of one per level (root_sig, intermediate_sig: a mixed
    hierarchy); the leaf with an embedded list of two SCTs signed by log keys of the leaf's algorithm; staple: an
    OCSP response for the leaf signed by the intermediate (ocsp.der); suppressed: the server sends the leaf alone
    and the client's trust file holds the intermediate."""
    alg = catalog.find(sig, "sig", field="sig")
    root = catalog.find(root_sig, "sig", field="root_sig") if root_sig else alg
    middle = catalog.find(intermediate_sig, "sig", field="intermediate_sig") if intermediate_sig else alg
    for a, field in ((alg, "sig"), (root, "root_sig"), (middle, "intermediate_sig")):
        _check_signer(a, field)
    out = _prepare_out(out)
    mk = _Maker(out, server_name)
    mk.root(root)
    mk.key("intermediate1", middle)
    inter = mk.issue("intermediate1", f"/O=pqbench/CN=pqbench intermediate CA ({middle.name})", "ca", "root", _serial())
    mk.key("leaf", alg)
    serial = _serial()
    subject = f"/O=pqbench/CN={server_name}"
    precert = mk.issue("leaf", subject, "leaf", "intermediate1", serial)  # the TBS the logs sign
    logs = _make_logs(mk, alg)
    line = _sct_extension(logs, alg, inter, precert_tbs(precert))
    final = mk.issue("leaf", subject, "leaf_sct", "intermediate1", serial, extra=mk.leaf_section("leaf_sct", line))
    if strip_extension(final, SCT_LIST_OID) != precert_tbs(precert):
        raise MeasurementFailed("the leaf with its SCTs differs from its precertificate beyond the SCT list")
    if staple:
        _ocsp_response(mk, "intermediate1", "leaf", serial)
    leaf_pem = (out / "leaf.crt").read_text()
    inter_pem = (out / "intermediate1.crt").read_text()
    (out / "intermediates.pem").write_text("" if suppressed else inter_pem)
    (out / "chain.pem").write_text(leaf_pem + ("" if suppressed else inter_pem))
    trust = out / "root.crt"
    if suppressed:  # the client has the intermediate
        trust = out / "trust.pem"
        trust.write_text((out / "root.crt").read_text() + inter_pem)
    return _finish(Chain(out, alg.name, middle.name, 0 if suppressed else 1, server_name, trust, out / "chain.pem",
                         out / "leaf.crt", out / "intermediates.pem", out / "leaf.key", {}))


def _pad_line(n: int) -> str:
    """The filler extension's line carrying an OCTET STRING of n zero bytes."""
    return f"{PAD_OID} = DER:{core.OctetString(bytes(n)).dump().hex(':')}\n"


def smallest_padded(sig: str) -> int:
    """A bound on the smallest padded chain of the algorithm (its leaf signed by STAND_IN_CA), from the catalog."""
    alg, ca = catalog.find(sig, "sig", field="sig"), catalog.find(STAND_IN_CA, "sig")
    return alg.pk + (ca.sig or 0) + LEAF_FRAMING_MAX


def make_padded(sig: str, out: Path, nbytes: int, *, ca_sig: str | None = None,
                server_name: str = DEFAULT_SERVER_NAME, root_from: Path | None = None) -> Chain:
    """root → leaf whose leaf carries a filler extension sized so that the server sends nbytes of DER exactly
    (size-only). BadInput when a root → leaf chain of the algorithm is already larger. root_from: the folder of
    an existing root (root.crt, root.key, of ca_sig) to issue the leaf from, instead of a new one."""
    if not 0 < nbytes <= MAX_PADDED:
        raise BadInput("chain_bytes", f"{nbytes} is outside 1..{MAX_PADDED} bytes")
    alg = catalog.find(sig, "sig", field="sig")
    ca = catalog.find(ca_sig, "sig", field="ca_sig") if ca_sig else alg
    _check_signer(alg, "sig")
    _check_signer(ca, "ca_sig")
    out = _prepare_out(out)
    mk = _Maker(out, server_name)
    if root_from:  # one CA for several leaves (a multi-origin page's origins, pqbench.webpages.serve)
        for name in ("root.crt", "root.key"):
            shutil.copyfile(Path(root_from) / name, out / name)
    else:
        mk.root(ca)
    mk.key("leaf", alg)
    serial, subject = _serial(), f"/O=pqbench/CN={server_name}"
    base = len(mk.issue("leaf", subject, "leaf", "root", serial))
    filler_overhead = 30  # the extension's OID 2.25.x and its headers (the loop below finds them exactly)
    want = nbytes - base
    if want < filler_overhead:
        raise BadInput("chain_bytes", f"{nbytes} bytes: a {alg.name} leaf signed by {ca.name} is already "
                                      f"{base} bytes (with its filler at least {base + filler_overhead})")
    extra_bytes, offsets = want - filler_overhead, []
    for _ in range(40):
        section = mk.leaf_section("leaf_pad", _pad_line(max(0, extra_bytes)))
        got = len(mk.issue("leaf", subject, "leaf_pad", "root", serial, extra=section))
        if got == nbytes:
            break
        # Each signing moves the size by a few bytes (ECDSA's DER integers): aim with the offset seen most
        # often, not the last one, which chased that noise (4,095 B missed in 1 of 3 tries after 12 signings)
        offsets.append(got - max(0, extra_bytes))
        extra_bytes = nbytes - max(set(offsets), key=offsets.count)
    else:
        raise MeasurementFailed(f"could not pad a {alg.name} leaf to exactly {nbytes} bytes (last {got})")
    (out / "intermediates.pem").write_text("")
    (out / "chain.pem").write_text((out / "leaf.crt").read_text())
    return _finish(Chain(out, alg.name, ca.name, 0, server_name, out / "root.crt", out / "chain.pem",
                         out / "leaf.crt", out / "intermediates.pem", out / "leaf.key", {}), size_only=True)


def make_sized_as(sig: str, out: Path, like: str, server_name: str = DEFAULT_SERVER_NAME) -> Chain:
    """The cell's root → leaf chain of sig, padded to the bytes a root → leaf chain of like sends (size-only:
    the sized_as axis, pqbench.algorithms.sized_chain_axis)."""
    from pqbench.algorithms import certs
    reference = certs.make_chain(like, Path(out) / f"{like}-reference", server_name=server_name)
    nbytes = reference.sent_bytes
    chain = make_padded(sig, out, nbytes, server_name=server_name)
    chain.parts = {**chain.parts, "stand_in": {"sized_as": like, "bytes": nbytes,
                                               "formula": f"the leaf of a real {like} root → leaf chain: {nbytes} B"}}
    (Path(out) / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain


def _finish(chain: Chain, size_only: bool = False) -> Chain:
    """Sizes and parts into the chain and its chain.json."""
    from pqbench.algorithms.certs import der_size
    names = ["root", *(f"intermediate{i}" for i in range(1, 9) if (chain.directory / f"intermediate{i}.crt").exists()),
             "leaf"]
    chain.der_sizes = {n: der_size(chain.directory / f"{n}.crt") for n in names}
    if chain.root_cert.name == "trust.pem":  # suppressed: the intermediate is the client's, not sent
        chain.der_sizes = {("client-" + k if k.startswith("intermediate") else k): v for k, v in chain.der_sizes.items()}
    chain.parts = {**parts(chain), "size_only": size_only}
    (chain.directory / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain


WEBPKI_SHAPES = ("webpki", "webpki-ocsp", "suppressed")  # root → intermediate → leaf, each level its own


CLIENT_NAME = "client.pqbench.test"  # the subject of a mutual-TLS client's certificate
# Trust anchor negotiation (draft-ietf-tls-trust-anchor-ids-06): a server keeps the cell's chain for the clients
# that name its root's trust anchor ID, and a classical chain from a root every client has for all others (as a
# CA's new post-quantum root meets clients that do not have it yet). IDs under RFC 5612's documentation arc (the
# draft's examples): the cell's root, the fallback's root, and one no server here has.
ANCHOR_IDS = {"chain": "32473.11", "fallback": "32473.12", "unknown": "32473.99"}
FALLBACK_SIG = "ecdsap256"


def make(sig: str, out: Path, shape: str | None = None, nbytes: int | None = None, sized_as: str | None = None,
         root_sig: str | None = None, intermediate_sig: str | None = None, client_sig: str | None = None,
         anchors: bool = False, server_name: str = DEFAULT_SERVER_NAME) -> Chain:
    """The chain a cell's chain, chain_bytes, sized_as, root_sig and intermediate_sig axes ask for (none: today's
    root → leaf); client_sig: with a client certificate of that algorithm for mutual TLS, from a client CA of its
    own (in out/client), its bytes by part under parts["client"]; anchors: with trust anchor IDs and a fallback
    chain (out/fallback, its bytes by part under parts["fallback"])."""
    chain = _server_chain(sig, Path(out), shape, nbytes, sized_as, root_sig, intermediate_sig, server_name)
    if client_sig:
        client = make_chain(client_sig, Path(out) / "client", server_name=CLIENT_NAME, leaf_section="client")
        chain.client_cert, chain.client_key, chain.client_ca = client.chain_file, client.leaf_key, client.root_cert
        chain.parts = {**chain.parts, "client": parts(client)}
    if anchors:
        _with_fallback(chain, Path(out), shape, server_name)
    if client_sig or anchors:
        (chain.directory / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain


def _with_fallback(chain: Chain, out: Path, shape: str | None, server_name: str) -> None:
    """The chain's trust anchor ID, and a FALLBACK_SIG chain of the same shape (WebPKI or root → leaf) from a root
    of its own; a trust file with both roots (a client that has both)."""
    fallback = make_webpki(FALLBACK_SIG, out / "fallback", server_name=server_name) if shape in WEBPKI_SHAPES \
        else make_chain(FALLBACK_SIG, out / "fallback", server_name=server_name)
    both = out / "trust-both.pem"
    both.write_text(Path(chain.root_cert).read_text() + Path(fallback.root_cert).read_text())
    chain.trust_anchors = {"id": ANCHOR_IDS["chain"], "unknown": ANCHOR_IDS["unknown"], "trust_both": both,
                           "fallback": {"id": ANCHOR_IDS["fallback"], "sig": FALLBACK_SIG, "chain": fallback.chain_file,
                                        "key": fallback.leaf_key, "root": fallback.root_cert,
                                        "sent_bytes": fallback.sent_bytes}}
    chain.parts = {**(chain.parts or parts(chain)), "fallback": parts(fallback)}


def _server_chain(sig, out, shape, nbytes, sized_as, root_sig, intermediate_sig, server_name) -> Chain:
    if sized_as:
        return make_sized_as(sig, out, sized_as, server_name)
    if shape in WEBPKI_SHAPES:
        return make_webpki(sig, out, staple=shape == "webpki-ocsp", suppressed=shape == "suppressed",
                           server_name=server_name, root_sig=root_sig, intermediate_sig=intermediate_sig)
    if shape and SHAPES[shape].mtc:
        return make_mtc(sig, out, SHAPES[shape].mtc, server_name)
    if shape:
        parse_shape("chain", shape)
        reference = make_webpki(sig, out / "webpki-reference", server_name=server_name)
        size = stand_in_bytes(shape, sig, reference)
        chain = make_padded(sig, out, size["bytes"], ca_sig=STAND_IN_CA, server_name=server_name)
        chain.parts = {**chain.parts, "stand_in": {"shape": shape, **size}}
        (out / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
        return chain
    if nbytes:
        return make_padded(sig, out, nbytes, ca_sig=STAND_IN_CA, server_name=server_name)
    return _finish(make_chain(sig, out, ca_sig=root_sig, server_name=server_name)) if root_sig else \
        make_chain(sig, out, server_name=server_name)


def make_mtc(sig: str, out: Path, kind: str, server_name: str = DEFAULT_SERVER_NAME) -> Chain:
    """A real MTC of kind from a CA of its own (pqbench.algorithms.mtc), with its bytes by part."""
    chain = mtc.make(sig, _prepare_out(out), kind, server_name)
    chain.parts = {**parts(chain), "size_only": False, "mtc": chain.parts["mtc"]}
    (chain.directory / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain


def directory_name(sig: str, shape: str | None, nbytes: int | None, sized_as: str | None = None,
                   root_sig: str | None = None, intermediate_sig: str | None = None,
                   client_sig: str | None = None, anchors: bool = False) -> str:
    """Where a run keeps the chain (under its certs/)."""
    return sig + (f"-{shape}" if shape else "") + (f"-{nbytes}B" if nbytes else "") + \
        (f"-sized-{sized_as}" if sized_as else "") + (f"-root-{root_sig}" if root_sig else "") + \
        (f"-intermediate-{intermediate_sig}" if intermediate_sig else "") + \
        (f"-client-{client_sig}" if client_sig else "") + ("-anchors" if anchors else "")
