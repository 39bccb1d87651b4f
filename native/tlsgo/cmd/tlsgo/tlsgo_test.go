package main

import (
	"crypto/tls"
	"slices"
	"testing"

	kit "pqbench/native/gotlskit"
)

// t_ns keys in pqtimer's order (gotlskit prints them: 0, null, ns since start).
func TestPhaseNamesArePqtimers(t *testing.T) {
	want := []string{"start", "tcp_connected", "client_hello_sent", "server_hello_received",
		"server_finished_received", "handshake_done", "first_byte", "last_byte"}
	if !slices.Equal(phaseNames[:], want) {
		t.Errorf("phase names %v, want %v", phaseNames, want)
	}
}

// The ClientHello our client really sends, as the server read it, offers exactly the one group asked
// for and lists ML-DSA among the algorithms it accepts in certificates.
func TestClientHelloAsSent(t *testing.T) {
	ch, err := kit.BaseChain()
	if err != nil {
		t.Fatal(err)
	}
	r, hello := handshake(ch, []tls.CurveID{tls.SecP256r1MLKEM768})
	if !r.OK || r.Group != tls.SecP256r1MLKEM768 || r.Sigalg != tls.ECDSAWithP256AndSHA256 {
		t.Fatalf("handshake: ok %v group %v sigalg %v err %s", r.OK, r.Group, r.Sigalg, r.Err)
	}
	algs, certAlgs, err := helloSigalgs(hello)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []tls.SignatureScheme{tls.MLDSA44, tls.ECDSAWithP256AndSHA256} {
		if !slices.Contains(algs, uint16(s)) {
			t.Errorf("signature_algorithms lacks %s", kit.SigalgString(s))
		}
		if certAlgs != nil && !slices.Contains(certAlgs, uint16(s)) {
			t.Errorf("signature_algorithms_cert lacks %s", kit.SigalgString(s))
		}
	}
	if _, _, err := helloSigalgs(hello[:20]); err == nil {
		t.Error("a truncated ClientHello parsed")
	}
}
