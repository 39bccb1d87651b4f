"""A Merkle Tree Certificate authority, written here from draft-ietf-plants-merkle-tree-certs-07: its issuance
log, the subtrees it and a mirror cosign, its landmarks, and the two kinds of certificate it issues.

- The CA has a trust anchor ID (a relative OID; ours is under RFC 5612's documentation arc, as the draft's
  examples are), one issuance log (log number 1, log ID {CA ID, 0, 1}) and a cosigning key. Its CA certificate
  (§5.5) names it by a trust-anchor-ID attribute, carries that key and the critical MTC CA extension (the
  cosignature algorithm, the serial range of its log).
- The log's entries are MerkleTreeCertEntry values hashed as RFC 9162 leaves: entry 0 and every entry we do
  not issue are null entries, so the log is the size of a busy CA's (LANDMARK_SIZE + BATCH entries) without
  holding millions of certificates; the few real entries are the TBSCertificateLogEntry of each certificate
  issued (§7.2: its issuer, validity, subject, the subject key's algorithm and hash, and its extensions).
- A standalone certificate proves inclusion in the newest BATCH entries (a subtree of BATCH, so log2(BATCH)
  proof hashes) and carries the cosignatures of the CA and of one mirror over that subtree ("subtree/v1"
  signed notes, §5.4); a landmark-relative one proves inclusion in the landmark subtree [0, LANDMARK_SIZE)
  (log2 of it hashes) and carries no signature: the relying party already trusts that subtree's hash.
- A certificate is an X.509 one whose signature algorithm is id-alg-mtcProof and whose signature value is its
  MTCProof (§6.1): the subtree, the inclusion proof, the cosignatures.

The relying party's trust file (trust.pem) holds the CA certificate, and outside its PEM block the lines the
client's verifier reads (pqrustls, with the independent `mtcs` crate): the mirror it requires
("mtc-cosigner ID ALG-OID SPKI-HEX") and the landmark subtrees it trusts ("mtc-subtree CA-ID LOG START END
HASH-HEX"). How a relying party gets those is left to it by the draft; this is pqbench's form of them.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import struct
from pathlib import Path

from asn1crypto import core, pem

from pqbench.algorithms import catalog, certs, der

CA_ID = "32473.1"  # RFC 5612's documentation enterprise number, as in the draft's examples
MIRROR_ID = "32473.2"  # the mirror that cosigns standalone certificates beside the CA
LOG_NUMBER = 1
COSIGNER_SIG = "mldsa44"  # the CA's and the mirror's cosignature algorithm
COSIGNER_OIDS = {"mldsa44": "2.16.840.1.101.3.4.3.17", "mldsa65": "2.16.840.1.101.3.4.3.18",
                 "mldsa87": "2.16.840.1.101.3.4.3.19", "ed25519": "1.3.101.112"}
MTC_PROOF_OID = "1.3.6.1.5.5.7.6.67"  # id-alg-mtcProof
MTC_CA_EXTENSION_OID = "1.3.6.1.5.5.7.1.38"  # id-pe-mtcCertificationAuthority-SHA256
TRUST_ANCHOR_ID_ATTRIBUTE = "1.3.6.1.5.5.7.25.3"
AKI_OID = "2.5.29.35"  # authorityKeyIdentifier: an MTC's issuer is a log, not a key
LANDMARK_SIZE = 1 << 23  # entries under the newest landmark (23 proof hashes)
BATCH = 1 << 12  # entries issued since, cosigned as one subtree (12 proof hashes)
TREE_SIZE = LANDMARK_SIZE + BATCH
NULL_ENTRY = b"\x00\x00" + b"\x00\x00"  # no entry extensions, type null_entry
KINDS = ("standalone", "landmark")


# --- DER, by hand: the names and algorithms here are ones asn1crypto does not know ----------------------

def _der(tag: int, content: bytes) -> bytes:
    return der.header(tag, len(content)) + content


def _seq(*parts: bytes) -> bytes:
    return _der(0x30, b"".join(parts))


def _int(v: int) -> bytes:
    return core.Integer(v).dump()


def _oid(dotted: str) -> bytes:
    return core.ObjectIdentifier(dotted).dump()


def relative_oid(dotted: str) -> bytes:
    """A trust anchor ID's binary form: the arcs of a RELATIVE-OID, base 128."""
    out = b""
    for arc in (int(a) for a in dotted.split(".")):
        chunk = [arc & 0x7F]
        while arc > 0x7F:
            arc >>= 7
            chunk.insert(0, 0x80 | (arc & 0x7F))
        out += bytes(chunk)
    return out


def note_name(dotted: str) -> bytes:
    """A trust anchor ID as a signed note names it (§5.4)."""
    return b"oid/1.3.6.1.4.1." + dotted.encode()


def _name(ca_id: str) -> bytes:
    """The CA's distinguished name: one trust-anchor-ID attribute (§5.5)."""
    return _seq(_der(0x31, _seq(_oid(TRUST_ANCHOR_ID_ATTRIBUTE), _der(0x0D, relative_oid(ca_id)))))


def _pem(der_bytes: bytes) -> str:
    return pem.armor("CERTIFICATE", der_bytes).decode()


def _time(t: datetime.datetime) -> bytes:
    return _der(0x17, t.strftime("%y%m%d%H%M%SZ").encode())


PROOF_ALGORITHM = _seq(_oid(MTC_PROOF_OID))  # an MTC's signature algorithm, as its DER says it


# --- the log -----------------------------------------------------------------------------------------------

def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def entry_hash(tbs: bytes, entry_extensions: bytes = b"") -> bytes:
    """The leaf hash of a certificate's log entry (§7.2): the TBSCertificateLogEntry is the TBSCertificate
    without its serial and signature algorithm, with the subject key's hash in place of the key."""
    fields = der.elements(tbs)
    version = fields.pop(0) if fields[0][0] == 0xA0 else b""
    _serial, _sigalg, issuer, validity, subject, spki, *rest = fields
    key_algorithm = der.elements(spki)[0]
    entry = (version + issuer + validity + subject + key_algorithm + _der(0x04, hashlib.sha256(spki).digest())
             + b"".join(rest))
    return hashlib.sha256(b"\x00" + struct.pack(">H", len(entry_extensions)) + entry_extensions
                          + b"\x00\x01" + entry).digest()


class Log:
    """An issuance log of TREE_SIZE entries: null entries but for those issued (index → leaf hash)."""

    def __init__(self, size: int = TREE_SIZE):
        self.entries = {}
        self._null = [hashlib.sha256(b"\x00" + NULL_ENTRY).digest()]  # a null subtree of 2**k entries
        while len(self._null) <= size.bit_length():
            self._null.append(_node(self._null[-1], self._null[-1]))

    def hash(self, start: int, end: int) -> bytes:
        """MTH of entries [start, end) (RFC 9162 §2.1.1)."""
        n = end - start
        if n == 1:
            return self.entries.get(start, self._null[0])
        if n & (n - 1) == 0 and not any(start <= i < end for i in self.entries):
            return self._null[n.bit_length() - 1]
        k = 1 << ((n - 1).bit_length() - 1)  # the largest power of two below n
        return _node(self.hash(start, start + k), self.hash(start + k, end))

    def inclusion_proof(self, index: int, start: int, end: int) -> list[bytes]:
        """The subtree inclusion proof of entry index in [start, end) (§4.3.1), leaf side first."""
        n = end - start
        if n == 1:
            return []
        k = 1 << ((n - 1).bit_length() - 1)
        if index < start + k:
            return self.inclusion_proof(index, start, start + k) + [self.hash(start + k, end)]
        return self.inclusion_proof(index, start + k, end) + [self.hash(start, start + k)]


def subtree_message(cosigner: str, subtree: tuple[int, int], subtree_hash: bytes) -> bytes:
    """What a cosigner signs for a subtree of the CA's log (§5.4: a "subtree/v1" note, timestamp 0)."""
    name, origin = note_name(cosigner), note_name(f"{CA_ID}.0.{LOG_NUMBER}")
    return (b"subtree/v1\n\x00" + bytes([len(name)]) + name + struct.pack(">Q", 0) + bytes([len(origin)]) + origin
            + struct.pack(">QQ", *subtree) + subtree_hash)


def mtc_proof(subtree: tuple[int, int], proof: list[bytes], cosignatures: list[tuple[str, bytes]]) -> bytes:
    """The MTCProof (§6.1): no entry extensions, the subtree, its inclusion proof, the cosignatures (in the
    draft's order: shorter IDs first)."""
    sigs = b"".join(bytes([len(relative_oid(i))]) + relative_oid(i) + struct.pack(">H", len(s)) + s
                    for i, s in sorted(cosignatures, key=lambda c: (len(relative_oid(c[0])), relative_oid(c[0]))))
    path = b"".join(proof)
    return (b"\x00\x00" + subtree[0].to_bytes(6, "big") + subtree[1].to_bytes(6, "big")
            + struct.pack(">H", len(path)) + path + len(sigs).to_bytes(3, "big") + sigs)


def proof_sizes(proof: bytes) -> tuple[int, list[int]]:
    """(inclusion proof bytes, each cosignature's signature bytes) of an MTCProof."""
    at = 2 + struct.unpack(">H", proof[:2])[0] + 12
    n = struct.unpack(">H", proof[at:at + 2])[0]
    at += 2 + n + 3
    sigs = []
    while at < len(proof):
        at += 1 + proof[at]
        size = struct.unpack(">H", proof[at:at + 2])[0]
        sigs.append(size)
        at += 2 + size
    return n, sigs


# --- the CA ------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Issued:
    kind: str
    der: bytes
    index: int
    subtree: tuple[int, int]
    proof_hashes: int
    cosignatures: int


class Authority:
    """One CA in a directory: its cosigning key and certificate, the mirror's key, its log."""

    def __init__(self, out: Path):
        self.out = Path(out)
        alg = catalog.find(COSIGNER_SIG, "sig")
        certs._check_signer(alg, "sig")
        self.now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.log = Log()
        self.keys = {}
        for who in ("ca", "mirror"):
            certs._new_key(alg, self.out / f"mtc-{who}.key")
            self.keys[who] = self.out / f"mtc-{who}.key"
        self.spki = {who: certs._openssl(["pkey", "-in", str(k), "-pubout", "-outform", "DER"], f"read the {who}'s key")
                     for who, k in self.keys.items()}
        self.ca_der = self._ca_certificate()

    def _sign(self, who: str, data: bytes) -> bytes:
        return certs.sign(self.keys[who], data)

    def _ca_certificate(self) -> bytes:
        algorithm = _seq(_oid(COSIGNER_OIDS[COSIGNER_SIG]))
        first = LOG_NUMBER << 48
        extensions = _seq(
            _seq(_oid(MTC_CA_EXTENSION_OID), core.Boolean(True).dump(),
                 _der(0x04, _seq(algorithm, _int(first), _int(first | (1 << 48) - 1)))),
            _seq(_oid("2.5.29.19"), core.Boolean(True).dump(), _der(0x04, _seq(core.Boolean(True).dump()))),
            _seq(_oid("2.5.29.15"), core.Boolean(True).dump(), _der(0x04, _der(0x03, b"\x02\x04"))))  # keyCertSign
        tbs = _seq(_der(0xA0, _int(2)), _int(1), algorithm, _name(CA_ID),
                   _seq(_time(self.now - datetime.timedelta(days=1)), _time(self.now + datetime.timedelta(days=3650))),
                   _name(CA_ID), self.spki["ca"], _der(0xA3, extensions))
        return _seq(tbs, algorithm, _der(0x03, b"\x00" + self._sign("ca", tbs)))

    def issue(self, leaf_der: bytes, kind: str, index: int) -> Issued:
        """An MTC of kind for the subject, key and extensions of an X.509 leaf (made by our OpenSSL), logged at
        entry index."""
        subtree = (0, LANDMARK_SIZE) if kind == "landmark" else (LANDMARK_SIZE, TREE_SIZE)
        if not subtree[0] <= index < subtree[1]:
            raise ValueError(f"entry {index} is outside the {kind} subtree {subtree}")
        fields = der.elements(der.elements(leaf_der)[0])
        if fields[0][0] == 0xA0:
            fields.pop(0)
        _serial, _sigalg, _issuer, _validity, subject, spki, *rest = fields
        kept = [e for e in der.elements(der.elements(rest[-1])[0]) if der.elements(e)[0] != _oid(AKI_OID)]
        proof_alg = PROOF_ALGORITHM
        validity = _seq(_time(self.now - datetime.timedelta(hours=1)), _time(self.now + datetime.timedelta(days=7)))
        tbs = _seq(_der(0xA0, _int(2)), _int(LOG_NUMBER << 48 | index), proof_alg, _name(CA_ID), validity,
                   subject, spki, _der(0xA3, _seq(*kept)))
        self.log.entries[index] = entry_hash(tbs)
        subtree_hash = self.log.hash(*subtree)
        proof = self.log.inclusion_proof(index, *subtree)
        cosignatures = []
        if kind == "standalone":
            cosignatures = [(who_id, self._sign(who, subtree_message(who_id, subtree, subtree_hash)))
                            for who, who_id in (("ca", CA_ID), ("mirror", MIRROR_ID))]
        cert = _seq(tbs, proof_alg, _der(0x03, b"\x00" + mtc_proof(subtree, proof, cosignatures)))
        return Issued(kind, cert, index, subtree, len(proof), len(cosignatures))

    def trust(self) -> str:
        """The relying party's trust file: the CA certificate, the mirror it requires, the landmark subtree."""
        return ("# a Merkle Tree CA (draft-ietf-plants-merkle-tree-certs-07) and what a relying party trusts of it\n"
                + _pem(self.ca_der)
                + f"mtc-cosigner {MIRROR_ID} {COSIGNER_OIDS[COSIGNER_SIG]} {self.spki['mirror'].hex()}\n"
                f"mtc-subtree {CA_ID} {LOG_NUMBER} 0 {LANDMARK_SIZE} {self.log.hash(0, LANDMARK_SIZE).hex()}\n")


def make(sig: str, out: Path, kind: str, server_name: str = certs.DEFAULT_SERVER_NAME) -> certs.Chain:
    """A real MTC of kind (standalone or landmark) for a fresh sig key, from a new CA in out: chain.pem (the MTC
    the server sends alone), leaf.key, trust.pem (the relying party's)."""
    out = Path(out)
    x509 = certs.make_chain(sig, out / "x509", server_name=server_name)  # the subject, key and extensions
    ca = Authority(out)
    index = {"landmark": LANDMARK_SIZE - 3, "standalone": TREE_SIZE - 5}[kind]
    issued = ca.issue(certs._openssl(["x509", "-in", str(x509.leaf_cert), "-outform", "DER"], "read the leaf"),
                      kind, index)
    for name in ("leaf.crt", "chain.pem"):
        (out / name).write_text(_pem(issued.der))
    (out / "intermediates.pem").write_text("")
    (out / "leaf.key").write_bytes(x509.leaf_key.read_bytes())
    (out / "leaf.key").chmod(0o600)
    (out / "trust.pem").write_text(ca.trust())
    return certs.Chain(out, catalog.find(sig, "sig").name, COSIGNER_SIG, 0, server_name, out / "trust.pem",
                       out / "chain.pem", out / "leaf.crt", out / "intermediates.pem", out / "leaf.key",
                       {"leaf": len(issued.der)},
                       {"mtc": {"kind": kind, "entry": issued.index, "subtree": list(issued.subtree),
                                "proof_hashes": issued.proof_hashes, "cosignatures": issued.cosignatures,
                                "cosigner": COSIGNER_SIG, "tree_size": TREE_SIZE}})
