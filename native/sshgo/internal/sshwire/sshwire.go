// Package sshwire follows the unencrypted start of an SSH connection (identification lines, then
// binary packets up to NEWKEYS) in one direction, for the clients that time it (sshtimer, sshload).
package sshwire

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// SSH message numbers (RFC 4253 section 12) a tracer looks for.
const (
	MsgKexInit = 20
	MsgNewKeys = 21
	// 30..49: messages of the key exchange method (ECDH/DH/ML-KEM init and reply, DH-GEX)
	MsgKexFirst = 30
	MsgKexLast  = 49
)

// Stream follows one direction of the unencrypted start of an SSH connection: identification lines
// (RFC 4253 section 4.2), then binary packets (uint32 length, padding length, payload) until NEWKEYS,
// after which everything is encrypted and it stops.
type Stream struct {
	identDone bool
	line      []byte
	hdr       [6]byte // packet length, padding length, message number
	hdrN      int
	rest      int // bytes of the current packet still to come after its header
	Stopped   bool
	Sizes     map[string]int // message name -> bytes on the wire (packet length field included)
	Kexinit   []byte         // the first KEXINIT's body after its message number (cookie, name-lists, padding)
	inKexinit bool
}

// Event is a complete message: "ident" or an SSH message number.
type Event struct {
	Msg  int // -1: identification line
	Size int
	End  int // offset in the fed buffer just after the message's last byte
}

// Feed consumes b and returns the messages it completes.
func (s *Stream) Feed(b []byte) []Event {
	var out []Event
	total := len(b)
	for len(b) > 0 && !s.Stopped {
		if !s.identDone {
			k := indexByte(b, '\n')
			if k < 0 {
				if len(s.line) < 300 { // only the prefix matters
					s.line = append(s.line, b...)
				}
				return out
			}
			s.line = append(s.line, b[:k]...)
			b = b[k+1:]
			if len(s.line) >= 4 && string(s.line[:4]) == "SSH-" {
				s.identDone = true
				out = append(out, Event{-1, len(s.line) + 1, total - len(b)})
			}
			s.line = s.line[:0]
			continue
		}
		if s.hdrN < len(s.hdr) {
			n := copy(s.hdr[s.hdrN:], b)
			s.hdrN += n
			b = b[n:]
			if s.hdrN < len(s.hdr) {
				return out
			}
			s.rest = int(binary.BigEndian.Uint32(s.hdr[:4])) + 4 - len(s.hdr)
			if s.rest < 0 || s.rest > 1<<20 { // not a packet we can follow: give up quietly
				s.Stopped = true
				return out
			}
			s.inKexinit = s.hdr[5] == MsgKexInit && s.Kexinit == nil
		}
		n := min(s.rest, len(b))
		if s.inKexinit {
			s.Kexinit = append(s.Kexinit, b[:n]...)
		}
		s.rest -= n
		b = b[n:]
		if s.rest == 0 {
			msg := int(s.hdr[5])
			size := int(binary.BigEndian.Uint32(s.hdr[:4])) + 4
			out = append(out, Event{msg, size, total - len(b)})
			s.hdrN = 0
			if msg == MsgNewKeys {
				s.Stopped = true
			}
		}
	}
	return out
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// MsgName names a message in the per-message byte counts.
func MsgName(msg int) string {
	switch {
	case msg == -1:
		return "ident"
	case msg == MsgKexInit:
		return "kexinit"
	case msg == MsgNewKeys:
		return "newkeys"
	case msg >= MsgKexFirst && msg <= MsgKexLast:
		return "kex_" + strconv.Itoa(msg)
	}
	return "msg_" + strconv.Itoa(msg)
}

// NameLists parses the name-lists of a KEXINIT body (after the 16-byte cookie): kex, host key, ...
func NameLists(body []byte) [][]string {
	if len(body) < 16 {
		return nil
	}
	b := body[16:]
	var out [][]string
	for k := 0; k < 10 && len(b) >= 4; k++ {
		n := int(binary.BigEndian.Uint32(b[:4]))
		if n > len(b)-4 {
			return out
		}
		var names []string
		if n > 0 {
			names = strings.Split(string(b[4:4+n]), ",")
		}
		out = append(out, names)
		b = b[4+n:]
	}
	return out
}

// Negotiated returns the key exchange and host key algorithm RFC 4253 7.1 picks from the client's and
// the server's KEXINIT bodies (Stream.Kexinit): the first client algorithm the server also offers, "" if unknown.
func Negotiated(clientKexinit, serverKexinit []byte) (kex, hostkey string) {
	c, s := NameLists(clientKexinit), NameLists(serverKexinit)
	pick := func(i int) string {
		if len(c) <= i || len(s) <= i {
			return ""
		}
		for _, a := range c[i] {
			for _, b := range s[i] {
				if a == b {
					return a
				}
			}
		}
		return ""
	}
	return pick(0), pick(1)
}

// ClassifyDial names an error of the TCP connect: connect_timeout, connect_refused or connect_error.
func ClassifyDial(err error) (class, msg string) {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "connect_timeout", "TCP connect did not complete within the timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connect_refused", err.Error()
	}
	return "connect_error", err.Error()
}

// Classify names an error of the SSH layer, during the stage named: timeout, closed, host_key, auth,
// negotiation or ssh_error.
func Classify(err error, during string) (class, msg string) {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout", during + " did not complete within the timeout"
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed", during + ": the server closed the connection: " + err.Error()
	}
	m := err.Error()
	switch {
	case strings.Contains(m, "host key mismatch"), strings.Contains(m, "ssh: host key"):
		return "host_key", during + ": " + m
	case strings.Contains(m, "unable to authenticate"):
		return "auth", during + ": " + m
	case strings.Contains(m, "no common algorithm"):
		return "negotiation", during + ": " + m
	}
	return "ssh_error", during + ": " + m
}
