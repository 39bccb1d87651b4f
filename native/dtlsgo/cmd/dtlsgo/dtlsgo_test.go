package main

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/dtls/v4"

	kit "pqbench/native/gotlskit"
)

// A real DTLS 1.3 handshake on loopback, the server as `dtlsgo server` configures a site, the client's sample
// as `dtlsgo client` prints it.
func measureOne(t *testing.T, group tls.CurveID, cookie bool) *sample {
	base, err := kit.BaseChain()
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	curves := curvesOf([]string{kit.GroupString(group)})
	ln, err := dtls.Listen(udp, serverOptions(base.Cert, curves, cookie, 0)...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var ok, failed atomic.Int64
	go serve(ln, &ok, &failed, log.New(io.Discard, "", 0))
	o := &clientOptions{ClientOptions: kit.ClientOptions{Host: "127.0.0.1", ServerName: kit.ProbeName, Mode: "handshake",
		Timeout: 10 * time.Second, Groups: []tls.CurveID{group}}, mtu: defaultMTU}
	opts, _ := clientConfig(o)
	c := &client{o: o, opts: opts, addr: udp.LocalAddr().(*net.UDPAddr)}
	s := &sample{}
	c.runSample(s)
	return s
}

func TestTheServerHelloNamesTheGroupAndACookieSendsTheClientHelloTwice(t *testing.T) {
	for _, cookie := range []bool{false, true} {
		for _, g := range []tls.CurveID{tls.X25519, tls.X25519MLKEM768} {
			s := measureOne(t, g, cookie)
			if !s.OK || s.Group == nil || *s.Group != kit.GroupString(g) {
				t.Fatalf("cookie %v %s: ok %v group %v error %v", cookie, kit.GroupString(g), s.OK, s.Group, s.Error)
			}
			d := s.DTLS
			want := 1
			if cookie {
				want = 2
			}
			if d.ClientHellos != want || d.Cookie != cookie || s.HRR != cookie {
				t.Fatalf("cookie %v %s: %d ClientHellos, cookie %v, hrr %v", cookie, kit.GroupString(g), d.ClientHellos,
					d.Cookie, s.HRR)
			}
			// an X25519MLKEM768 ClientHello (a 1,216-byte share) does not fit pion's 1,200-byte datagrams
			perHello := 1
			if g == tls.X25519MLKEM768 {
				perHello = 2
			}
			if d.ClientHelloDatagrams != want*perHello {
				t.Fatalf("cookie %v %s: ClientHellos in %d datagrams", cookie, kit.GroupString(g), d.ClientHelloDatagrams)
			}
			ph := s.phases
			if !(ph[phClientHelloSent] > 0 && ph[phServerHelloReceived] > ph[phClientHelloSent] &&
				ph[phHandshakeDone] >= ph[phServerHelloReceived]) {
				t.Fatalf("phases out of order: %v", ph)
			}
			if s.WireMilestone == nil || s.WireMilestone.Offset != d.BytesSent-int64(d.lastSize) {
				t.Fatalf("milestone %+v, %d bytes sent", s.WireMilestone, d.BytesSent)
			}
			if s.Sigalg == nil || *s.Sigalg != "ecdsa_secp256r1_sha256" {
				t.Fatalf("sigalg %v", s.Sigalg)
			}
		}
	}
}

func TestAHelloRetryRequestIsToldApartAndCutShortMessagesAreNotParsed(t *testing.T) {
	hrr := append([]byte{0xfe, 0xfd}, hrrRandom[:]...)
	hrr = append(hrr, 0, 0x13, 0x01, 0, 0, 14, 0, 44, 0, 4, 0, 2, 1, 2, 0, 51, 0, 2, 0x11, 0xec)
	h, ok := parseServerHello(hrr)
	if !ok || !h.retry || !h.cookie || h.group != 0x11ec {
		t.Fatalf("%+v %v", h, ok)
	}
	if _, ok := parseServerHello(hrr[:len(hrr)-3]); ok {
		t.Fatal("a cut-short ServerHello parsed")
	}
}
