package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"slices"
	"testing"
)

func TestGroupNamesRoundTripAndAliases(t *testing.T) {
	for _, g := range knownGroups {
		id, err := parseGroup(g.name)
		if err != nil || id != g.id || groupString(id) != g.name {
			t.Errorf("%s: parsed %v (%v), printed %q", g.name, id, err, groupString(id))
		}
	}
	for in, want := range map[string]tls.CurveID{"X25519": tls.X25519, "P-256": tls.CurveP256,
		"x25519mlkem768": tls.X25519MLKEM768, "0x11ec": tls.X25519MLKEM768, "514": tls.MLKEM1024} {
		if id, err := parseGroup(in); err != nil || id != want {
			t.Errorf("%s: got %v (%v), want %v", in, id, err, want)
		}
	}
	if _, err := parseGroups("x25519:frodo640aes"); err == nil {
		t.Error("an unknown group was accepted")
	}
}

func TestPhasesPrintNullWhereNotObserved(t *testing.T) {
	var p orderedPhases
	p[phStart], p[phTCPConnected], p[phHandshakeDone] = 1000, 1500, 9000
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start":0,"tcp_connected":500,"client_hello_sent":null,"server_hello_received":null,` +
		`"server_finished_received":null,"handshake_done":8000,"first_byte":null,"last_byte":null}`
	if string(b) != want {
		t.Errorf("got %s", b)
	}
}

// The ClientHello our client really sends, as the server read it, offers exactly the one group asked
// for and lists ML-DSA among the algorithms it accepts in certificates.
func TestClientHelloAsSent(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := makeChain(key, key)
	if err != nil {
		t.Fatal(err)
	}
	r := handshake(ch, []tls.CurveID{tls.SecP256r1MLKEM768})
	if !r.ok || r.group != tls.SecP256r1MLKEM768 || r.sigalg != tls.ECDSAWithP256AndSHA256 {
		t.Fatalf("handshake: ok %v group %v sigalg %v err %s", r.ok, r.group, r.sigalg, r.err)
	}
	algs, certAlgs, err := helloSigalgs(r.clientHello)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []tls.SignatureScheme{tls.MLDSA44, tls.ECDSAWithP256AndSHA256} {
		if !slices.Contains(algs, uint16(s)) {
			t.Errorf("signature_algorithms lacks %s", sigalgString(s))
		}
		if certAlgs != nil && !slices.Contains(certAlgs, uint16(s)) {
			t.Errorf("signature_algorithms_cert lacks %s", sigalgString(s))
		}
	}
	if _, _, err := helloSigalgs(r.clientHello[:20]); err == nil {
		t.Error("a truncated ClientHello parsed")
	}
}
