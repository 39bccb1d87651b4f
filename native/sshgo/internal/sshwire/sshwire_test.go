package sshwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// packet frames payload (length field + padding length + payload + padding: 9 + len(payload) bytes)
// as an unencrypted SSH binary packet (RFC 4253 section 6) with 4 bytes of padding.
func packet(payload ...byte) []byte {
	pad := 4
	b := binary.BigEndian.AppendUint32(nil, uint32(1+len(payload)+pad))
	b = append(b, byte(pad))
	b = append(b, payload...)
	return append(b, make([]byte, pad)...)
}

func nameList(names string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(names))), names...)
}

func kexinit(kex, hostkey string) []byte {
	p := append([]byte{MsgKexInit}, make([]byte, 16)...) // cookie
	p = append(p, nameList(kex)...)
	p = append(p, nameList(hostkey)...)
	for i := 0; i < 8; i++ {
		p = append(p, nameList("")...)
	}
	return append(p, 0, 0, 0, 0, 0) // first_kex_packet_follows, reserved
}

// A stream read in pieces of every size gives the same messages: identification, KEXINIT, the key
// exchange reply, NEWKEYS; nothing after NEWKEYS (encrypted) is parsed.
func TestFeedFindsTheMessagesWhateverTheReadSizes(t *testing.T) {
	var wire []byte
	wire = append(wire, "a banner line before the identification\r\nSSH-2.0-test\r\n"...)
	wire = append(wire, packet(kexinit("mlkem768x25519-sha256,curve25519-sha256", "ssh-ed25519")...)...)
	wire = append(wire, packet(append([]byte{31}, make([]byte, 1200)...)...)...)
	wire = append(wire, packet(MsgNewKeys)...)
	wire = append(wire, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0) // ciphertext
	for piece := 1; piece <= len(wire); piece += 7 {
		var s Stream
		var got []string
		for off := 0; off < len(wire); off += piece {
			for _, e := range s.Feed(wire[off:min(off+piece, len(wire))]) {
				got = append(got, fmt.Sprintf("%s:%d", MsgName(e.Msg), e.Size))
			}
		}
		want := fmt.Sprint([]string{"ident:14", fmt.Sprintf("kexinit:%d", len(packet(kexinit("mlkem768x25519-sha256,curve25519-sha256", "ssh-ed25519")...))),
			"kex_31:1210", "newkeys:10"})
		if fmt.Sprint(got) != want || !s.Stopped {
			t.Fatalf("pieces of %d: got %v (stopped %v), want %v", piece, got, s.Stopped, want)
		}
	}
}

func TestNegotiatedIsTheFirstClientChoiceTheServerOffers(t *testing.T) {
	c := kexinit("mlkem768x25519-sha256,curve25519-sha256", "ssh-ed25519,ecdsa-sha2-nistp256")[1:]
	s := kexinit("curve25519-sha256,mlkem768x25519-sha256", "ecdsa-sha2-nistp256")[1:]
	if kex, hk := Negotiated(c, s); kex != "mlkem768x25519-sha256" || hk != "ecdsa-sha2-nistp256" {
		t.Fatalf("got %q %q", kex, hk)
	}
	if kex, _ := Negotiated(c, kexinit("diffie-hellman-group14-sha256", "ssh-ed25519")[1:]); kex != "" {
		t.Fatalf("no common key exchange gave %q", kex)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassesOfErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err   error
		dial  bool
		class string
	}{
		{refused, true, "connect_refused"},
		{&net.OpError{Op: "dial", Err: timeoutErr{}}, true, "connect_timeout"},
		{errors.New("socket: too many open files"), true, "connect_error"},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, false, "timeout"},
		{io.EOF, false, "closed"},
		{fmt.Errorf("wrapped: %w", syscall.ECONNRESET), false, "closed"},
		{errors.New("ssh: no common algorithm for key exchange; ..."), false, "negotiation"},
		{errors.New("ssh: unable to authenticate, attempted methods [none]"), false, "auth"},
		{errors.New("ssh: host key mismatch"), false, "host_key"},
		{errors.New("ssh: something else"), false, "ssh_error"},
	} {
		var got string
		if c.dial {
			got, _ = ClassifyDial(c.err)
		} else {
			got, _ = Classify(c.err, "key exchange")
		}
		if got != c.class {
			t.Errorf("%v: got %s, want %s", c.err, got, c.class)
		}
	}
}
