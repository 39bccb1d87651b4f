package sshkeys

// Size-only host keys. No SSH implementation has SPHINCS+, SLH-DSA, Falcon, ... host keys, but what
// such a key costs a handshake is mostly its bytes: the server sends its public key and a signature
// in the key exchange reply. A size-only host key, named sizeonly-<signature>, stands in for one: an
// ed25519 host certificate whose key id is padded so that the certificate blob plus the ed25519
// signature blob the server sends are exactly that algorithm's public key + signature bytes. The
// cryptography is ed25519's; only the sizes are the other algorithm's, and the key id says so.

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// SizeOnlyPrefix starts the name of a size-only host key.
const SizeOnlyPrefix = "sizeonly-"

// CertAlg is the host key algorithm a size-only host key negotiates.
const CertAlg = ssh.CertAlgoED25519v01

// ed25519SigBlob is the signature blob an ed25519 host key sends: string "ssh-ed25519", string sig.
const ed25519SigBlob = 4 + len(ssh.KeyAlgoED25519) + 4 + ed25519.SignatureSize

// IsSizeOnly says whether a host key name is a size-only host key.
func IsSizeOnly(name string) bool { return strings.HasPrefix(name, SizeOnlyPrefix) }

// IsCert says whether a host key algorithm is a certificate algorithm (the host key a client is given
// is then the CA that signed it).
func IsCert(alg string) bool { return strings.Contains(alg, "-cert-v01@") }

// ErrTooSmall: the asked size is below the unpadded certificate's.
var ErrTooSmall = errors.New("smaller than the certificate without padding")

// PaddedHostCert signs a host certificate for hostKey (ed25519) with ca, valid for principal from an
// hour ago on (forever: the CA exists only in one run's key set), whose key id is keyID followed by
// padding such that len(certificate blob) + the ed25519 signature blob == total.
func PaddedHostCert(ca ssh.Signer, hostKey ssh.PublicKey, principal, keyID string,
	total int) (*ssh.Certificate, error) {
	if hostKey.Type() != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("the host key is %s; a size-only host key is ed25519", hostKey.Type())
	}
	cert := &ssh.Certificate{Key: hostKey, Serial: 1, CertType: ssh.HostCert, KeyId: keyID,
		ValidPrincipals: []string{principal}, ValidAfter: uint64(time.Now().Add(-time.Hour).Unix()),
		ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		return nil, err
	}
	unpadded := len(cert.Marshal()) + ed25519SigBlob
	if total < unpadded {
		return nil, fmt.Errorf("%d bytes: %w (%d bytes at least)", total, ErrTooSmall, unpadded)
	}
	// every field but the key id has a fixed size (ed25519 CA, one principal), so the padding adds
	// exactly its own length; sign again over the padded key id
	cert.KeyId = keyID + strings.Repeat(".", total-unpadded)
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		return nil, err
	}
	if got := len(cert.Marshal()) + ed25519SigBlob; got != total {
		return nil, fmt.Errorf("the padded certificate sends %d bytes, not %d", got, total)
	}
	return cert, nil
}

// LoadHostCert reads a host certificate in authorized_keys format (as the hostcert subcommand writes).
func LoadHostCert(path string) (*ssh.Certificate, error) {
	k, err := LoadPublic(path)
	if err != nil {
		return nil, err
	}
	cert, ok := k.(*ssh.Certificate)
	if !ok || cert.CertType != ssh.HostCert {
		return nil, fmt.Errorf("%s: not a host certificate", path)
	}
	return cert, nil
}

// CAHostKeyCheck accepts a host certificate signed by ca and valid for principal (the name the
// certificate gives the server; clients here connect to an address, which no certificate names).
func CAHostKeyCheck(ca ssh.PublicKey, principal string) ssh.HostKeyCallback {
	want := string(ca.Marshal())
	checker := &ssh.CertChecker{IsHostAuthority: func(auth ssh.PublicKey, _ string) bool {
		return string(auth.Marshal()) == want
	}}
	return func(_ string, remote net.Addr, key ssh.PublicKey) error {
		if err := checker.CheckHostKey(net.JoinHostPort(principal, "22"), remote, key); err != nil {
			return fmt.Errorf("ssh: host key certificate refused: %w", err) // a host key failure to sshtimer
		}
		return nil
	}
}
