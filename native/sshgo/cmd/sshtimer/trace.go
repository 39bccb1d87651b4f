package main

import (
	"net"
	"sync"
	"time"

	"pqbench/native/sshgo/internal/sshwire"
)

// The stream parser (identification lines, packets up to NEWKEYS, KEXINIT name-lists) is
// internal/sshwire, shared with sshload.

// tracer wraps the TCP connection: it times the SSH messages as they pass through Read and Write
// (reads: when Read returns them; writes: just before they are handed to the kernel), and counts the
// client's flights the way the wire recorder does (a run of client payload packets, ended by server
// payload), so a sample can say which flight carries its NEWKEYS.
type tracer struct {
	net.Conn
	mu            sync.Mutex
	sent, recv    sshwire.Stream
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
		sent: sshwire.Stream{Sizes: map[string]int{}}, recv: sshwire.Stream{Sizes: map[string]int{}}}
}

func (t *tracer) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		now := time.Now()
		t.mu.Lock()
		t.lastDir = 2
		for _, e := range t.recv.Feed(b[:n]) {
			t.recv.Sizes[sshwire.MsgName(e.Msg)] += e.Size
			switch {
			case e.Msg == -1:
				t.at["server_ident_received"] = now
			case e.Msg == sshwire.MsgKexInit:
				t.kexinitRecv = now
				t.exchanged()
			case e.Msg >= sshwire.MsgKexFirst && e.Msg <= sshwire.MsgKexLast:
				t.at["kex_reply_received"] = now
			case e.Msg == sshwire.MsgNewKeys:
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
	if !t.sent.Stopped && len(b) > 0 {
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
	for _, e := range t.sent.Feed(b) {
		t.sent.Sizes[sshwire.MsgName(e.Msg)] += e.Size
		switch e.Msg {
		case sshwire.MsgKexInit:
			t.kexinitSent = now
			t.exchanged()
		case sshwire.MsgNewKeys:
			t.at["newkeys_sent"] = now
			t.newkeysFlight = t.c2sFlights - 1
			t.newkeysOffset = t.written + e.End - e.Size
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

// negotiated returns the key exchange and host key algorithm RFC 4253 7.1 picks from the two
// KEXINITs the tracer saw (the first client algorithm the server also offers), "" if unknown.
func (t *tracer) negotiated() (kex, hostkey string) {
	return sshwire.Negotiated(t.sent.Kexinit, t.recv.Kexinit)
}
