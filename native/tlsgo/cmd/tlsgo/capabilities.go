package main

// `tlsgo capabilities`: what this build of crypto/tls can do, found by trying it, not by a list.
// Every candidate group and every certificate key type is put through a real TLS 1.3 handshake
// between this binary's own client and server configuration, in memory (net.Pipe): a group counts
// when the handshake negotiates exactly it, a signature algorithm when a chain of that algorithm
// (root and leaf) verifies and the server's CertificateVerify uses it. The ClientHello the client
// sends is parsed as well, so what it offers in signature_algorithms and signature_algorithms_cert
// (what an OpenSSL server uses to pick or refuse a chain) is reported as sent on the wire.

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
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"runtime"
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

type chainPEMless struct {
	cert tls.Certificate
	root *x509.Certificate
}

const probeName = "probe.pqbench.test"

func makeChain(rootKey, leafKey crypto.Signer) (*chainPEMless, error) {
	now := time.Now()
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tlsgo probe root"},
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
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: probeName},
		DNSNames: []string{probeName}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, leafKey.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate: %w", err)
	}
	return &chainPEMless{tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, root}, nil
}

// recorder keeps the first bytes the server reads: the ClientHello record.
type recorder struct {
	net.Conn
	first []byte
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if len(r.first) < 1<<16 {
		r.first = append(r.first, b[:n]...)
	}
	return n, err
}

type probeResult struct {
	ok          bool
	err         string
	group       tls.CurveID
	sigalg      tls.SignatureScheme
	clientHello []byte
}

// handshake runs one TLS 1.3 handshake in memory between the client and server configurations.
func handshake(ch *chainPEMless, groups []tls.CurveID) probeResult {
	pool := x509.NewCertPool()
	pool.AddCert(ch.root)
	scfg := &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: groups, SessionTicketsDisabled: true,
		Certificates: []tls.Certificate{ch.cert}}
	ccfg := &tls.Config{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13, CurvePreferences: groups,
		RootCAs: pool, ServerName: probeName}
	cEnd, sEnd := net.Pipe()
	rec := &recorder{Conn: sEnd}
	done := make(chan error, 1)
	go func() {
		s := tls.Server(rec, scfg)
		err := s.Handshake()
		_ = s.Close()
		done <- err
	}()
	c := tls.Client(cEnd, ccfg)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	cerr := c.Handshake()
	var r probeResult
	if cerr == nil {
		r.ok, r.group = true, c.ConnectionState().CurveID
		r.sigalg, _ = peerSigAlg(c)
	} else {
		r.err = cerr.Error()
	}
	_ = cEnd.Close()
	serr := <-done
	if cerr == nil && serr != nil && !errors.Is(serr, net.ErrClosed) {
		r.ok, r.err = false, "server: "+serr.Error()
	}
	r.clientHello = rec.first
	return r
}

// helloSigalgs returns the signature_algorithms (13) and signature_algorithms_cert (50) lists of a
// ClientHello record; nil for an extension that is absent.
func helloSigalgs(rec []byte) (algs, certAlgs []uint16, err error) {
	short := errors.New("short ClientHello")
	if len(rec) < 9 || rec[0] != 22 || rec[5] != 1 {
		return nil, nil, errors.New("not a ClientHello record")
	}
	b := rec[9:] // after the record header (5) and handshake header (4)
	skip := func(n int) bool {
		if len(b) < n {
			return false
		}
		b = b[n:]
		return true
	}
	vec := func(lenBytes int) ([]byte, bool) {
		if len(b) < lenBytes {
			return nil, false
		}
		n := 0
		for i := 0; i < lenBytes; i++ {
			n = n<<8 | int(b[i])
		}
		b = b[lenBytes:]
		if len(b) < n {
			return nil, false
		}
		v := b[:n]
		b = b[n:]
		return v, true
	}
	if !skip(2 + 32) { // legacy_version, random
		return nil, nil, short
	}
	for _, l := range []int{1, 2, 1} { // session id, cipher suites, compression methods
		if _, ok := vec(l); !ok {
			return nil, nil, short
		}
	}
	exts, ok := vec(2)
	if !ok {
		return nil, nil, short
	}
	for len(exts) >= 4 {
		typ := binary.BigEndian.Uint16(exts)
		n := int(binary.BigEndian.Uint16(exts[2:]))
		if len(exts) < 4+n {
			return nil, nil, short
		}
		body := exts[4 : 4+n]
		exts = exts[4+n:]
		if typ != 13 && typ != 50 {
			continue
		}
		list := []uint16{}
		if len(body) >= 2 {
			for i := 2; i+1 < len(body); i += 2 {
				list = append(list, binary.BigEndian.Uint16(body[i:]))
			}
		}
		if typ == 13 {
			algs = list
		} else {
			certAlgs = list
		}
	}
	return algs, certAlgs, nil
}

type groupCap struct {
	Name      string `json:"name"`
	Codepoint string `json:"codepoint"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
}

type sigCap struct {
	Sig    string `json:"sig"` // pqbench catalog name of the key type (root and leaf)
	OK     bool   `json:"ok"`
	Sigalg string `json:"sigalg,omitempty"` // the server's CertificateVerify, as OpenSSL names it
	Error  string `json:"error,omitempty"`
}

func names16(list []uint16) []string {
	if list == nil {
		return nil
	}
	out := []string{}
	for _, v := range list {
		out = append(out, sigalgString(tls.SignatureScheme(v)))
	}
	return out
}

func capabilitiesMain() int {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tlsgo:", err)
		return 3
	}
	base, err := makeChain(p256, p256)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tlsgo:", err)
		return 3
	}
	var groups []groupCap
	var hello []byte
	for _, g := range knownGroups {
		r := handshake(base, []tls.CurveID{g.id})
		c := groupCap{Name: g.name, Codepoint: fmt.Sprintf("0x%04x", uint16(g.id)), OK: r.ok && r.group == g.id}
		if !c.OK {
			c.Error = r.err
			if r.ok {
				c.Error = "negotiated " + groupString(r.group)
			}
		}
		if g.id == tls.X25519 {
			hello = r.clientHello
		}
		groups = append(groups, c)
	}
	var sigs []sigCap
	for _, k := range keyKinds {
		c := sigCap{Sig: k.name}
		root, err1 := k.gen()
		leaf, err2 := k.gen()
		var ch *chainPEMless
		err := errors.Join(err1, err2)
		if err == nil {
			ch, err = makeChain(root, leaf)
		}
		if err != nil {
			c.Error = err.Error()
		} else if r := handshake(ch, []tls.CurveID{tls.X25519}); r.ok {
			c.OK, c.Sigalg = true, sigalgString(r.sigalg)
		} else {
			c.Error = r.err
		}
		sigs = append(sigs, c)
	}
	algs, certAlgs, herr := helloSigalgs(hello)
	out := map[string]any{
		"stack":  "gotls",
		"go":     runtime.Version(),
		"groups": groups,
		"sigs":   sigs,
		"client_hello": map[string]any{
			"signature_algorithms":      names16(algs),
			"signature_algorithms_cert": names16(certAlgs), // null: extension absent (signature_algorithms applies)
			"error":                     errString(herr),
		},
		"modes": []string{"handshake", "page", "requests", "resume"},
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		return 3
	}
	return 0
}

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}
