package main

// `quicgo capabilities`: what quic-go on this build of crypto/tls can do over QUIC, found by trying it.
// Every candidate group and certificate key type is put through a real QUIC handshake on loopback UDP
// between this binary's own client and server configurations: a group counts when the handshake
// negotiates exactly it, a signature algorithm when a chain of that algorithm (root and leaf) verifies
// and the server's CertificateVerify uses it. The signature algorithms the client offers are read
// from the ClientHello as the server saw it (crypto/tls's ClientHelloInfo; it does not expose
// signature_algorithms_cert).

import (
	"context"
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
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/quic-go/quic-go"
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

type probeChain struct {
	cert tls.Certificate
	root *x509.Certificate
}

const probeName = "probe.pqbench.test"

func makeChain(rootKey, leafKey crypto.Signer) (*probeChain, error) {
	now := time.Now()
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quicgo probe root"},
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
	return &probeChain{tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, root}, nil
}

type probeResult struct {
	ok      bool
	err     string
	group   tls.CurveID
	sigalg  tls.SignatureScheme
	offered []tls.SignatureScheme // the ClientHello's signature_algorithms, as the server read it
	gso     bool
}

// handshake runs one QUIC handshake on loopback UDP between the client and server configurations.
func handshake(ch *probeChain, groups []tls.CurveID) (r probeResult) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	sudp, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return probeResult{err: "loopback UDP: " + err.Error()}
	}
	str := &quic.Transport{Conn: sudp}
	defer sudp.Close()
	defer str.Close()
	scfg := &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: groups, SessionTicketsDisabled: true,
		Certificates: []tls.Certificate{ch.cert}, NextProtos: []string{"pqbench-probe"},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			r.offered = append([]tls.SignatureScheme(nil), h.SignatureSchemes...)
			return nil, nil
		}}
	ln, err := str.Listen(scfg, &quic.Config{})
	if err != nil {
		return probeResult{err: err.Error()}
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err == nil {
			<-c.HandshakeComplete()
			<-c.Context().Done() // until the client closes
		}
		done <- err
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ch.root)
	ccfg := &tls.Config{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13, CurvePreferences: groups,
		RootCAs: pool, ServerName: probeName, NextProtos: []string{"pqbench-probe"}}
	cudp, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return probeResult{err: "loopback UDP: " + err.Error()}
	}
	ctr := &quic.Transport{Conn: newCountingConn(cudp)}
	defer cudp.Close()
	defer ctr.Close()
	conn, err := ctr.Dial(ctx, sudp.LocalAddr(), ccfg, &quic.Config{})
	if err != nil {
		r.err = err.Error()
		return r
	}
	st := conn.ConnectionState()
	r.ok, r.group, r.gso = true, st.TLS.CurveID, st.GSO
	r.sigalg, _ = peerSigAlg(conn)
	_ = conn.CloseWithError(0, "")
	if serr := <-done; serr != nil && !errors.Is(serr, context.Canceled) {
		r.ok, r.err = false, "server: "+serr.Error()
	}
	return r
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

func quicGoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/quic-go/quic-go" {
				return m.Version
			}
		}
	}
	return ""
}

func capabilitiesMain() int {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err == nil {
		var base *probeChain
		if base, err = makeChain(p256, p256); err == nil {
			return reportCapabilities(base)
		}
	}
	fmt.Fprintln(os.Stderr, "quicgo:", err)
	return 3
}

func reportCapabilities(base *probeChain) int {
	var groups []groupCap
	var offered []string
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
			for _, s := range r.offered {
				offered = append(offered, sigalgString(s))
			}
		}
		groups = append(groups, c)
	}
	var sigs []sigCap
	for _, k := range keyKinds {
		c := sigCap{Sig: k.name}
		root, err1 := k.gen()
		leaf, err2 := k.gen()
		var ch *probeChain
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
	out := map[string]any{
		"stack":   "quicgo",
		"go":      runtime.Version(),
		"quic_go": quicGoVersion(),
		"groups":  groups,
		"sigs":    sigs,
		"client_hello": map[string]any{
			"signature_algorithms": offered,
		},
		"modes":        []string{"handshake", "page"},
		"transports":   []string{"quic"},
		"initial_size": map[string]int{"min": minInitialSize, "max": maxInitialSize},
		"retry":        true,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		return 3
	}
	return 0
}
