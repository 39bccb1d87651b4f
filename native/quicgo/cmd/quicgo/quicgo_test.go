package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"testing"
)

// longHeader builds a QUIC v1/v2 long-header packet of the given 2-bit type code with a payload of n bytes.
func longHeader(version uint32, code byte, token []byte, n int) []byte {
	b := []byte{0xc0 | code<<4, byte(version >> 24), byte(version >> 16), byte(version >> 8), byte(version),
		4, 1, 2, 3, 4, 0}
	if code == 0 && version == quicV1 || code == 1 && version == quicV2 { // Initial: token
		b = append(b, byte(len(token)))
		b = append(b, token...)
	}
	b = append(b, 0x40|byte(n>>8), byte(n)) // 2-byte varint length
	return append(b, make([]byte, n)...)
}

func TestPacketKindsWalksCoalescedPackets(t *testing.T) {
	initial := longHeader(quicV1, 0, []byte("tok"), 300)
	hs := longHeader(quicV1, 2, nil, 500)
	short := append([]byte{0x40}, make([]byte, 100)...)
	cases := map[string]struct {
		b    []byte
		want uint8
	}{
		"initial alone":              {initial, kindInitial},
		"initial+handshake+1rtt":     {append(append(append([]byte{}, initial...), hs...), short...), kindInitial | kindHandshake | kindShort},
		"retry":                      {[]byte{0xf0, 0, 0, 0, 1, 0, 0, 9, 9, 9}, kindRetry},
		"v2 handshake (type code 3)": {longHeader(quicV2, 3, nil, 40), kindHandshake},
		"v2 initial (type code 1)":   {longHeader(quicV2, 1, nil, 40), kindInitial},
		"version negotiation":        {[]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, kindVersionNegotiation},
		"truncated handshake":        {hs[:100], kindHandshake | kindUnparsed},
		"1-RTT only":                 {short, kindShort},
	}
	for name, c := range cases {
		if got := packetKinds(c.b); got != c.want {
			t.Errorf("%s: kinds %s, want %s", name, kindString(got), kindString(c.want))
		}
	}
}

func TestPhasesPrintInOrderNullWhereNotObserved(t *testing.T) {
	var p orderedPhases
	p[phStart], p[phClientHelloSent], p[phHandshakeDone] = 1000, 1500, 9000
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start":0,"client_hello_sent":500,"server_hello_received":null,"handshake_packet_received":null,` +
		`"server_finished_received":null,"handshake_done":8000,"first_byte":null,"last_byte":null}`
	if string(b) != want {
		t.Errorf("got %s", b)
	}
}

// A real QUIC handshake on loopback negotiates the one group asked for, reads the server's signature
// algorithm through quic-go's connection, and sends without segmentation offload.
func TestLoopbackHandshakeNegotiatesAndReadsTheSigalg(t *testing.T) {
	disableGSO()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := makeChain(key, key)
	if err != nil {
		t.Fatal(err)
	}
	r := handshake(ch, []tls.CurveID{tls.X25519MLKEM768})
	if !r.ok || r.group != tls.X25519MLKEM768 || r.sigalg != tls.ECDSAWithP256AndSHA256 || r.gso {
		t.Fatalf("ok %v group %v sigalg %v gso %v err %s", r.ok, r.group, r.sigalg, r.gso, r.err)
	}
}
