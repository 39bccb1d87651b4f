package main

// `dtlsgo capabilities`: what pion/dtls can do in DTLS 1.3 on this build, found by trying it. Every candidate
// group and certificate key type is put through a real DTLS 1.3 handshake on loopback UDP between this
// binary's own client and server configurations: a group counts when the server's ServerHello chooses exactly
// it, a signature algorithm when a chain of that algorithm (root and leaf) verifies.

import (
	"context"
	"crypto/tls"
	"net"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/pion/dtls/v4"
	"github.com/pion/dtls/v4/pkg/crypto/elliptic"
	"github.com/pion/dtls/v4/pkg/protocol"

	kit "pqbench/native/gotlskit"
)

func handshake(ch *kit.ProbeChain, groups []tls.CurveID) (r kit.ProbeResult, _ struct{}) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	curves := make([]elliptic.Curve, len(groups))
	for i, g := range groups {
		curves[i] = elliptic.Curve(g)
	}
	sudp, err := net.ListenUDP("udp4", lo)
	if err != nil {
		r.Err = "loopback UDP: " + err.Error()
		return r, struct{}{}
	}
	ln, err := dtls.Listen(sudp, serverOptions(ch.Cert, curves, true, 0)...)
	if err != nil {
		r.Err = err.Error()
		return r, struct{}{}
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.(*dtls.Conn).HandshakeContext(ctx)
			defer c.Close()
		}
		served <- err
	}()
	cudp, err := net.ListenUDP("udp4", lo)
	if err != nil {
		r.Err = "loopback UDP: " + err.Error()
		return r, struct{}{}
	}
	cc := &countingConn{PacketConn: cudp}
	defer cudp.Close()
	conn, err := dtls.Client(cc, ln.Addr(), dtls.WithMinVersion(protocol.Version1_3),
		dtls.WithMaxVersion(protocol.Version1_3), dtls.WithEllipticCurves(curves...), dtls.WithRootCAs(ch.RootPool()),
		dtls.WithServerName(kit.ProbeName))
	if err == nil {
		err = conn.HandshakeContext(ctx)
		defer conn.Close()
	}
	if err != nil {
		r.Err = err.Error()
		return r, struct{}{}
	}
	if serr := <-served; serr != nil {
		r.Err = "server: " + serr.Error()
		return r, struct{}{}
	}
	_, received := cc.snapshot()
	hellos, _ := serverHellos(received)
	for _, h := range hellos {
		if !h.retry {
			r.Group = tls.CurveID(h.group)
		}
	}
	if st, ok := conn.ConnectionState(); ok && len(st.PeerCertificates) > 0 {
		r.Sigalg, _ = leafSigalg(st.PeerCertificates[0])
	}
	r.OK = true
	return r, struct{}{}
}

func pionVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/pion/dtls/v4" {
				return m.Version
			}
		}
	}
	return ""
}

func capabilitiesMain() int {
	base, err := kit.BaseChain()
	if err != nil {
		return 3
	}
	groups, _ := kit.ProbeGroups(base, handshake)
	out := map[string]any{
		"stack":      "dtlsgo",
		"go":         runtime.Version(),
		"pion_dtls":  pionVersion(),
		"groups":     groups,
		"sigs":       kit.ProbeSigs(handshake),
		"modes":      []string{"handshake"},
		"transports": []string{"udp"},
		"cookie":     true,
		"mtu":        map[string]int{"default": defaultMTU},
	}
	return kit.PrintReport(out)
}
