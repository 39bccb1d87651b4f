package main

import (
	"crypto/tls"
	"slices"
	"testing"

	kit "pqbench/native/gotlskit"
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

// t_ns keys in the QUIC sample's order (gotlskit prints them: 0, null, ns since start).
func TestPhaseNamesAreTheQUICSamples(t *testing.T) {
	want := []string{"start", "client_hello_sent", "server_hello_received", "handshake_packet_received",
		"server_finished_received", "handshake_done", "first_byte", "last_byte"}
	if !slices.Equal(phaseNames[:], want) {
		t.Errorf("phase names %v, want %v", phaseNames, want)
	}
}

// A real QUIC handshake on loopback negotiates the one group asked for, reads the server's signature
// algorithm through quic-go's connection, and sends without segmentation offload.
func TestLoopbackHandshakeNegotiatesAndReadsTheSigalg(t *testing.T) {
	disableGSO()
	ch, err := kit.BaseChain()
	if err != nil {
		t.Fatal(err)
	}
	r, x := handshake(ch, []tls.CurveID{tls.X25519MLKEM768})
	if !r.OK || r.Group != tls.X25519MLKEM768 || r.Sigalg != tls.ECDSAWithP256AndSHA256 || x.gso {
		t.Fatalf("ok %v group %v sigalg %v gso %v err %s", r.OK, r.Group, r.Sigalg, x.gso, r.Err)
	}
}
