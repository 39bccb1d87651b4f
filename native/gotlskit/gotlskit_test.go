package gotlskit

import (
	"crypto/tls"
	"encoding/json"
	"testing"
)

func TestGroupNamesRoundTripAndAliases(t *testing.T) {
	for _, g := range KnownGroups {
		id, err := ParseGroup(g.Name)
		if err != nil || id != g.ID || GroupString(id) != g.Name {
			t.Errorf("%s: parsed %v (%v), printed %q", g.Name, id, err, GroupString(id))
		}
	}
	for in, want := range map[string]tls.CurveID{"X25519": tls.X25519, "P-256": tls.CurveP256,
		"x25519mlkem768": tls.X25519MLKEM768, "0x11ec": tls.X25519MLKEM768, "514": tls.MLKEM1024} {
		if id, err := ParseGroup(in); err != nil || id != want {
			t.Errorf("%s: got %v (%v), want %v", in, id, err, want)
		}
	}
	if _, err := ParseGroups("x25519:frodo640aes"); err == nil {
		t.Error("an unknown group was accepted")
	}
}

func TestPhasesPrintInOrderNullWhereNotObserved(t *testing.T) {
	got := string(PhasesJSON([]string{"start", "b", "a", "c"}, []int64{1000, 1500, 0, 9000}))
	if want := `{"start": 0, "b": 500, "a": null, "c": 8000}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A stack's sample embeds SampleHead first: its keys open the line in pqtimer's order, the stack's follow.
func TestSampleHeadOpensTheLineInOrder(t *testing.T) {
	var s struct {
		SampleHead
		Group *string `json:"group"`
	}
	s.Worker, s.I, s.Mode = 2, 7, "page"
	s.Finish([]string{"start", "handshake_done"}, []int64{100, 350}, &Outcome{})
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"worker":2,"i":7,"mode":"page","ok":true,"error_class":null,"error":null,` +
		`"t_ns":{"start":0,"handshake_done":250},"start_mono_ns":100,"local_port":null,"group":null}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var out Outcome
	out.Set("timeout", "first %d", 1)
	out.Set("closed", "second")
	s.Finish([]string{"start"}, []int64{5}, &out)
	if !s.Failed() || *s.ErrorClass != "timeout" || *s.Error != "first 1" {
		t.Errorf("failure not kept as first set: %v %v %v", s.OK, *s.ErrorClass, *s.Error)
	}
}
