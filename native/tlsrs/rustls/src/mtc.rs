//! Merkle Tree Certificates on the client: a trust file's MTC CAs, the cosigners it requires and the landmark
//! subtrees it trusts, as the `mtcs` crate's TrustStore; a server certificate whose signature algorithm is
//! id-alg-mtcProof is verified by that crate (inclusion proof, cosignatures or landmark) and by webpki for the
//! server name, and its CertificateVerify like any other (the leaf's key).
//!
//! The trust file is PEM: each CERTIFICATE that is an MTC CA certificate (draft §5.5) adds its CA; lines outside
//! the PEM blocks add what the draft leaves to the relying party's own channel:
//!   mtc-cosigner ID ALG-OID SPKI-HEX           a cosigner every standalone certificate of these CAs needs
//!   mtc-subtree CA-ID LOG START END HASH-HEX   a landmark subtree trusted for landmark-relative certificates

use mtcs::{CaTrust, CosignerInfo, SignatureAlgorithm, TrustAnchorId, TrustStore, TrustedSubtree};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

const MTC_PROOF_ALGORITHM: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x06, 0x43];

/// The MTC trust of a trust file, None when it names no MTC CA.
pub fn load(path: &str) -> Result<Option<TrustStore>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut cas = vec![];
    for der in CertificateDer::pem_slice_iter(text.as_bytes()).flatten() {
        if let Ok(ca) = CaTrust::from_ca_certificate(&der) {
            cas.push(ca);
        }
    }
    if cas.is_empty() {
        return Ok(None);
    }
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["mtc-cosigner", id, oid, spki] => {
                let algorithm = SignatureAlgorithm::from_algorithm_oid(oid).ok_or(format!("{path}: unknown cosigner algorithm {oid}"))?;
                let cosigner = CosignerInfo { id: anchor(id)?, algorithm, spki_der: hex(spki)? };
                for ca in cas.iter_mut() {
                    ca.require_cosigner(cosigner.clone()).map_err(|e| format!("{path}: {e}"))?;
                }
            }
            ["mtc-subtree", ca_id, log, start, end, hash] => {
                let id = anchor(ca_id)?;
                let hash: [u8; 32] = hex(hash)?.try_into().map_err(|_| format!("{path}: a subtree hash is 32 bytes"))?;
                let subtree = TrustedSubtree { log_number: number(log)?, start: number(start)?, end: number(end)?, hash };
                let ca = cas.iter_mut().find(|c| c.ca_id == id).ok_or(format!("{path}: subtree of an unknown CA {ca_id}"))?;
                ca.trust_subtree(subtree);
            }
            [first, ..] if first.starts_with("mtc-") => return Err(format!("{path}: cannot read the line {line:?}")),
            _ => {}
        }
    }
    let mut store = TrustStore::new();
    for ca in cas {
        store.add_ca(ca);
    }
    Ok(Some(store))
}

fn anchor(dotted: &str) -> Result<TrustAnchorId, String> {
    TrustAnchorId::from_dotted(dotted).map_err(|e| format!("trust anchor ID {dotted}: {e}"))
}

fn number<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{text} is not a number"))
}

fn hex(text: &str) -> Result<Vec<u8>, String> {
    if text.len() % 2 != 0 {
        return Err(format!("{text} is not hex"));
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|_| format!("{text} is not hex"))).collect()
}

/// Whether a certificate is an MTC: the algorithm after its TBSCertificate is id-alg-mtcProof.
pub fn is_mtc(der: &[u8]) -> bool {
    let Some((body, _)) = element(der) else { return false };
    let Some((_, after_tbs)) = element(body) else { return false };
    after_tbs.starts_with(MTC_PROOF_ALGORITHM)
}

/// (the content of the DER element at the start of input, what follows it)
fn element(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let first = *input.get(1)? as usize;
    let (len, at) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        (input.get(2..2 + n)?.iter().fold(0usize, |v, &b| v << 8 | b as usize), 2 + n)
    };
    Some((input.get(at..at + len)?, input.get(at + len..)?))
}

/// Verifies an MTC end-entity certificate for server_name: its proof by `mtcs`, its name by webpki.
pub fn verify(store: &TrustStore, end_entity: &CertificateDer<'_>, server_name: &ServerName<'_>, now: UnixTime)
              -> Result<mtcs::Verification, String> {
    let verified = mtcs::verify_certificate(store, end_entity, now.as_secs() as i64).map_err(|e| e.to_string())?;
    let cert = webpki::EndEntityCert::try_from(end_entity).map_err(|e| format!("the MTC does not parse: {e:?}"))?;
    cert.verify_is_valid_for_subject_name(server_name).map_err(|e| format!("{e:?}"))?;
    Ok(verified)
}
