package main

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SSH message numbers (RFC 4253 section 12) the tracer looks for.
const (
	msgKexInit = 20
	msgNewKeys = 21
	// 30..49: messages of the key exchange method (ECDH/DH/ML-KEM init and reply, DH-GEX)
	msgKexFirst = 30
	msgKexLast  = 49
)

// stream follows one direction of the unencrypted start of an SSH connection: identification lines
// (RFC 4253 section 4.2), then binary packets (uint32 length, padding length, payload) until NEWKEYS,
// after which everything is encrypted and it stops.
type stream struct {
	identDone bool
	line      []byte
	hdr       [6]byte // packet length, padding length, message number
	hdrN      int
	rest      int // bytes of the current packet still to come after its header
	stopped   bool
	sizes     map[string]int // message name -> bytes on the wire (packet length field included)
	kexinit   []byte         // the first KEXINIT's body after its message number (cookie, name-lists, padding)
	inKexinit bool
}

// event is a complete message: "ident" or an SSH message number.
type event struct {
	msg  int // -1: identification line
	size int
	end  int // offset in the fed buffer just after the message's last byte
}

// feed consumes b and returns the messages it completes.
func (s *stream) feed(b []byte) []event {
	var out []event
	total := len(b)
	for len(b) > 0 && !s.stopped {
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
				out = append(out, event{-1, len(s.line) + 1, total - len(b)})
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
				s.stopped = true
				return out
			}
			s.inKexinit = s.hdr[5] == msgKexInit && s.kexinit == nil
		}
		n := min(s.rest, len(b))
		if s.inKexinit {
			s.kexinit = append(s.kexinit, b[:n]...)
		}
		s.rest -= n
		b = b[n:]
		if s.rest == 0 {
			msg := int(s.hdr[5])
			size := int(binary.BigEndian.Uint32(s.hdr[:4])) + 4
			out = append(out, event{msg, size, total - len(b)})
			s.hdrN = 0
			if msg == msgNewKeys {
				s.stopped = true
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

func msgName(msg int) string {
	switch {
	case msg == -1:
		return "ident"
	case msg == msgKexInit:
		return "kexinit"
	case msg == msgNewKeys:
		return "newkeys"
	case msg >= msgKexFirst && msg <= msgKexLast:
		return "kex_" + strconv.Itoa(msg)
	}
	return "msg_" + strconv.Itoa(msg)
}

// tracer wraps the TCP connection: it times the SSH messages as they pass through Read and Write
// (reads: when Read returns them; writes: just before they are handed to the kernel), and counts the
// client's flights the way the wire recorder does (a run of client payload packets, ended by server
// payload), so a sample can say which flight carries its NEWKEYS.
type tracer struct {
	net.Conn
	mu            sync.Mutex
	sent, recv    stream
	at            map[string]time.Time
	kexinitSent   time.Time
	kexinitRecv   time.Time
	lastDir       int // 0 none, 1 c2s, 2 s2c
	c2sFlights    int
	newkeysFlight int
	tcpAtNewkeys  *tcpCounts
	// TCP_INFO bytes_received at the previous write (flight counting, see Write)
	receivedAtWrite uint64
	written         int // bytes written so far
	newkeysOffset   int // bytes the client had sent before its NEWKEYS (-1: not yet)
}

// record puts what the tracer saw into a sample's phase times (through at) and returns where
// handshake_done (the client's NEWKEYS, copied into tns) lies on the wire, or nil; the caller holds t.mu.
func (t *tracer) record(tns map[string]*int64, at func(string, time.Time)) *milestone {
	for name, when := range t.at {
		at(name, when)
	}
	if tns["newkeys_sent"] == nil {
		return nil
	}
	v := *tns["newkeys_sent"]
	tns["handshake_done"] = &v
	return &milestone{"c2s", t.newkeysFlight, "first", t.newkeysOffset}
}

func newTracer(c net.Conn) *tracer {
	return &tracer{Conn: c, at: map[string]time.Time{}, newkeysFlight: -1, newkeysOffset: -1,
		sent: stream{sizes: map[string]int{}}, recv: stream{sizes: map[string]int{}}}
}

func (t *tracer) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		now := time.Now()
		t.mu.Lock()
		t.lastDir = 2
		for _, e := range t.recv.feed(b[:n]) {
			t.recv.sizes[msgName(e.msg)] += e.size
			switch {
			case e.msg == -1:
				t.at["server_ident_received"] = now
			case e.msg == msgKexInit:
				t.kexinitRecv = now
				t.exchanged()
			case e.msg >= msgKexFirst && e.msg <= msgKexLast:
				t.at["kex_reply_received"] = now
			case e.msg == msgNewKeys:
				t.at["newkeys_received"] = now
			}
		}
		t.mu.Unlock()
	}
	return n, err
}

func (t *tracer) Write(b []byte) (int, error) {
	// A write starts a new client flight when payload from the server arrived since the previous one:
	// asked of the kernel (TCP_INFO bytes_received), not inferred from Read, because the server's
	// identification and KEXINIT may arrive together yet be read one after the other around our writes.
	var received uint64
	counted := false
	if !t.sent.stopped && len(b) > 0 {
		if tcp, ok := t.Conn.(*net.TCPConn); ok {
			if c := readTCPInfo(tcp); c != nil {
				received, counted = c.BytesReceived, true
			}
		}
	}
	now := time.Now()
	t.mu.Lock()
	if counted {
		if t.c2sFlights == 0 || received > t.receivedAtWrite {
			t.c2sFlights++
		}
		t.receivedAtWrite = received
	} else if t.lastDir != 1 && len(b) > 0 {
		t.c2sFlights++
	}
	if len(b) > 0 {
		t.lastDir = 1
	}
	newkeys := false
	for _, e := range t.sent.feed(b) {
		t.sent.sizes[msgName(e.msg)] += e.size
		switch e.msg {
		case msgKexInit:
			t.kexinitSent = now
			t.exchanged()
		case msgNewKeys:
			t.at["newkeys_sent"] = now
			t.newkeysFlight = t.c2sFlights - 1
			t.newkeysOffset = t.written + e.end - e.size
			newkeys = true
		}
	}
	t.written += len(b)
	t.mu.Unlock()
	n, err := t.Conn.Write(b)
	if newkeys {
		if tcp, ok := t.Conn.(*net.TCPConn); ok {
			c := readTCPInfo(tcp)
			t.mu.Lock()
			t.tcpAtNewkeys = c
			t.mu.Unlock()
		}
	}
	return n, err
}

// exchanged: both KEXINITs are through once the later of the two is.
func (t *tracer) exchanged() {
	if !t.kexinitSent.IsZero() && !t.kexinitRecv.IsZero() {
		last := t.kexinitSent
		if t.kexinitRecv.After(last) {
			last = t.kexinitRecv
		}
		t.at["kexinit_exchanged"] = last
	}
}

// keysExchanged: NEWKEYS went both ways, so the key exchange completed and the host key was accepted.
func (t *tracer) keysExchanged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.at["newkeys_sent"].IsZero() && !t.at["newkeys_received"].IsZero()
}

// stage names how far the connection got, for an error message.
func (t *tracer) stage() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.at["newkeys_sent"].IsZero():
		return "authentication"
	case !t.at["server_ident_received"].IsZero():
		return "key exchange"
	}
	return "identification exchange"
}

// nameLists parses the name-lists of a KEXINIT body (after the 16-byte cookie): kex, host key, ...
func nameLists(body []byte) [][]string {
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

// negotiated returns the key exchange and host key algorithm RFC 4253 7.1 picks from the two
// KEXINITs the tracer saw (the first client algorithm the server also offers), "" if unknown.
func (t *tracer) negotiated() (kex, hostkey string) {
	c, s := nameLists(t.sent.kexinit), nameLists(t.recv.kexinit)
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
