package gotlskit

// The capability probes both stacks run: every candidate group and every certificate key type is put
// through a real handshake (in memory for tlsgo, on loopback UDP for quicgo) between the stack's own
// client and server configurations. A group counts when the handshake negotiates exactly it, a
// signature algorithm when a chain of that algorithm (root and leaf) verifies and the server's
// CertificateVerify uses it.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/mldsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"
)

type keyKind struct {
	name string // pqbench catalog name of the signature algorithm
	gen  func() (crypto.Signer, error)
}

var keyKinds = []keyKind{
	{"ecdsap256", func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }},
	{"ecdsap384", func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P384(), rand.Reader) }},
	{"ecdsap521", func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P521(), rand.Reader) }},
	{"ed25519", func() (crypto.Signer, error) { _, k, err := ed25519.GenerateKey(rand.Reader); return k, err }},
	{"rsa2048", func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 2048) }},
	{"mldsa44", func() (crypto.Signer, error) { return mldsa.GenerateKey(mldsa.MLDSA44()) }},
	{"mldsa65", func() (crypto.Signer, error) { return mldsa.GenerateKey(mldsa.MLDSA65()) }},
	{"mldsa87", func() (crypto.Signer, error) { return mldsa.GenerateKey(mldsa.MLDSA87()) }},
}

// ProbeChain is a root and a leaf for ProbeName, made for one probe.
type ProbeChain struct {
	Cert tls.Certificate
	Root *x509.Certificate
}

const ProbeName = "probe.pqbench.test"

// RootPool trusts the chain's root alone.
func (ch *ProbeChain) RootPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ch.Root)
	return pool
}

func makeChain(rootKey, leafKey crypto.Signer) (*ProbeChain, error) {
	now := time.Now()
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: Program + " probe root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("root certificate: %w", err)
	}
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ProbeName},
		DNSNames: []string{ProbeName}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, leafKey.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate: %w", err)
	}
	return &ProbeChain{tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, root}, nil
}

// BaseChain is the ECDSA P-256 chain the group probes use.
func BaseChain() (*ProbeChain, error) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return makeChain(p256, p256)
}

// ProbeResult is what every probe handshake tells; a stack's handshake adds its own extra (E).
type ProbeResult struct {
	OK     bool
	Err    string
	Group  tls.CurveID
	Sigalg tls.SignatureScheme
}

type Handshake[E any] func(ch *ProbeChain, groups []tls.CurveID) (ProbeResult, E)

type GroupCap struct {
	Name      string `json:"name"`
	Codepoint string `json:"codepoint"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
}

type SigCap struct {
	Sig    string `json:"sig"` // pqbench catalog name of the key type (root and leaf)
	OK     bool   `json:"ok"`
	Sigalg string `json:"sigalg,omitempty"` // the server's CertificateVerify, as OpenSSL names it
	Error  string `json:"error,omitempty"`
}

// ProbeGroups tries each known group alone on the base chain; it returns the extra of the x25519
// handshake too (what the client offered, as the stack saw it).
func ProbeGroups[E any](base *ProbeChain, hs Handshake[E]) (groups []GroupCap, x25519 E) {
	for _, g := range KnownGroups {
		r, extra := hs(base, []tls.CurveID{g.ID})
		c := GroupCap{Name: g.Name, Codepoint: fmt.Sprintf("0x%04x", uint16(g.ID)), OK: r.OK && r.Group == g.ID}
		if !c.OK {
			c.Error = r.Err
			if r.OK {
				c.Error = "negotiated " + GroupString(r.Group)
			}
		}
		if g.ID == tls.X25519 {
			x25519 = extra
		}
		groups = append(groups, c)
	}
	return groups, x25519
}

// ProbeSigs tries a chain of each key type (root and leaf) over x25519.
func ProbeSigs[E any](hs Handshake[E]) []SigCap {
	var sigs []SigCap
	for _, k := range keyKinds {
		c := SigCap{Sig: k.name}
		root, err1 := k.gen()
		leaf, err2 := k.gen()
		var ch *ProbeChain
		err := errors.Join(err1, err2)
		if err == nil {
			ch, err = makeChain(root, leaf)
		}
		if err != nil {
			c.Error = err.Error()
		} else if r, _ := hs(ch, []tls.CurveID{tls.X25519}); r.OK {
			c.OK, c.Sigalg = true, SigalgString(r.Sigalg)
		} else {
			c.Error = r.Err
		}
		sigs = append(sigs, c)
	}
	return sigs
}

// PrintReport writes the capabilities report as indented JSON: 0, or 3 when stdout cannot be written.
func PrintReport(report any) int {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(report); err != nil {
		return 3
	}
	return 0
}
