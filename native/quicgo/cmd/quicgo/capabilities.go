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
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/quic-go/quic-go"

	kit "pqbench/native/gotlskit"
)

// probeExtra is what a QUIC probe tells beyond the common result.
type probeExtra struct {
	offered []tls.SignatureScheme // the ClientHello's signature_algorithms, as the server read it
	gso     bool
}

// handshake runs one QUIC handshake on loopback UDP between the client and server configurations.
func handshake(ch *kit.ProbeChain, groups []tls.CurveID) (r kit.ProbeResult, x probeExtra) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	sudp, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return kit.ProbeResult{Err: "loopback UDP: " + err.Error()}, x
	}
	str := &quic.Transport{Conn: sudp}
	defer sudp.Close()
	defer str.Close()
	scfg := &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: groups, SessionTicketsDisabled: true,
		Certificates: []tls.Certificate{ch.Cert}, NextProtos: []string{"pqbench-probe"},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			x.offered = append([]tls.SignatureScheme(nil), h.SignatureSchemes...)
			return nil, nil
		}}
	ln, err := str.Listen(scfg, &quic.Config{})
	if err != nil {
		return kit.ProbeResult{Err: err.Error()}, x
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The client closes only once the server has its connection: closed at once after Dial returned, the
	// client's Finished could still be unsent (or unacknowledged), and the server, its handshake never
	// complete, had nothing to accept until the timeout (3 of 25 runs beside a busy machine: a group the
	// build negotiates reported as failing after 20 s).
	accepted, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		c, err := ln.Accept(ctx)
		if err == nil {
			select {
			case <-c.HandshakeComplete():
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		accepted <- err
		if err == nil {
			select { // until the client closes
			case <-c.Context().Done():
			case <-ctx.Done():
			}
		}
	}()
	ccfg := &tls.Config{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13, CurvePreferences: groups,
		RootCAs: ch.RootPool(), ServerName: kit.ProbeName, NextProtos: []string{"pqbench-probe"}}
	cudp, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return kit.ProbeResult{Err: "loopback UDP: " + err.Error()}, x
	}
	ctr := &quic.Transport{Conn: newCountingConn(cudp)}
	defer cudp.Close()
	defer ctr.Close()
	conn, err := ctr.Dial(ctx, sudp.LocalAddr(), ccfg, &quic.Config{})
	if err != nil {
		r.Err = err.Error()
		return r, x
	}
	st := conn.ConnectionState()
	r.OK, r.Group, x.gso = true, st.TLS.CurveID, st.GSO
	r.Sigalg, _ = peerSigAlg(conn)
	serr := <-accepted
	_ = conn.CloseWithError(0, "")
	<-ended
	if serr != nil && !errors.Is(serr, context.Canceled) {
		r.OK, r.Err = false, "server: "+serr.Error()
	}
	return r, x
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
	base, err := kit.BaseChain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicgo:", err)
		return 3
	}
	groups, x25519 := kit.ProbeGroups(base, handshake)
	var offered []string
	for _, s := range x25519.offered {
		offered = append(offered, kit.SigalgString(s))
	}
	sigs := kit.ProbeSigs(handshake)
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
	return kit.PrintReport(out)
}
