package main

// `tlsgo capabilities`: what this build of crypto/tls can do, found by trying it, not by a list.
// Every candidate group and every certificate key type is put through a real TLS 1.3 handshake
// between this binary's own client and server configuration, in memory (net.Pipe): a group counts
// when the handshake negotiates exactly it, a signature algorithm when a chain of that algorithm
// (root and leaf) verifies and the server's CertificateVerify uses it. The ClientHello the client
// sends is parsed as well, so what it offers in signature_algorithms and signature_algorithms_cert
// (what an OpenSSL server uses to pick or refuse a chain) is reported as sent on the wire.

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	kit "pqbench/native/gotlskit"
)

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

// handshake runs one TLS 1.3 handshake in memory between the client and server configurations.
// Its extra is the ClientHello record as the server read it.
func handshake(ch *kit.ProbeChain, groups []tls.CurveID) (r kit.ProbeResult, clientHello []byte) {
	scfg := &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: groups, SessionTicketsDisabled: true,
		Certificates: []tls.Certificate{ch.Cert}}
	ccfg := &tls.Config{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13, CurvePreferences: groups,
		RootCAs: ch.RootPool(), ServerName: kit.ProbeName}
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
	if cerr == nil {
		r.OK, r.Group = true, c.ConnectionState().CurveID
		r.Sigalg, _ = peerSigAlg(c)
	} else {
		r.Err = cerr.Error()
	}
	_ = cEnd.Close()
	serr := <-done
	if cerr == nil && serr != nil && !errors.Is(serr, net.ErrClosed) {
		r.OK, r.Err = false, "server: "+serr.Error()
	}
	return r, rec.first
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

func names16(list []uint16) []string {
	if list == nil {
		return nil
	}
	out := []string{}
	for _, v := range list {
		out = append(out, kit.SigalgString(tls.SignatureScheme(v)))
	}
	return out
}

func capabilitiesMain() int {
	base, err := kit.BaseChain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tlsgo:", err)
		return 3
	}
	groups, hello := kit.ProbeGroups(base, handshake)
	sigs := kit.ProbeSigs(handshake)
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
	return kit.PrintReport(out)
}

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}
