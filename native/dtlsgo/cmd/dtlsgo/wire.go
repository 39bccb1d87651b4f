package main

// The client's own view of its datagrams: a net.PacketConn that stamps every datagram it writes and reads
// (CLOCK_MONOTONIC_RAW, as the samples' phases) and keeps the plaintext handshake fragments (epoch 0: the
// ClientHellos, the server's HelloRetryRequest and ServerHello) so the sample can say what crossed: how many
// ClientHellos left and in how many datagrams, whether the server asked for a cookie, and the group its
// ServerHello chose. Everything after the ServerHello is encrypted (RFC 9147 §4: the unified header) and is
// only counted.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"sync"

	kit "pqbench/native/gotlskit"
)

const (
	contentHandshake = 22
	msgClientHello   = 1
	msgServerHello   = 2
	extCookie        = 44
	extKeyShare      = 51
	plaintextHeader  = 13 // DTLSPlaintext: type, version, epoch, sequence number, length
	handshakeHeader  = 12 // type, length, message_seq, fragment_offset, fragment_length
)

// RFC 8446 §4.1.3: a HelloRetryRequest is a ServerHello whose random is SHA-256("HelloRetryRequest").
var hrrRandom = sha256.Sum256([]byte("HelloRetryRequest"))

type datagram struct {
	t    int64
	size int
	// handshake fragments of plaintext records in it: (message type, message_seq, offset, bytes)
	fragments []fragment
}

type fragment struct {
	msgType byte
	seq     uint16
	offset  int
	total   int
	data    []byte
}

// parseDatagram lists the plaintext handshake fragments of a datagram's records; an encrypted record (its
// first byte 001xxxxx, the unified header) ends the scan unless it says its length.
func parseDatagram(b []byte) []fragment {
	var out []fragment
	for len(b) > 0 {
		if b[0]&0xe0 == 0x20 { // unified header: C, S, L bits, then the rest of the datagram or L's length
			h := 1 + 1
			if b[0]&0x08 != 0 { // S: 16-bit sequence number
				h++
			}
			if b[0]&0x10 != 0 { // C: a connection ID, whose length we do not know here
				return out
			}
			if b[0]&0x04 == 0 {
				return out
			}
			if len(b) < h+2 {
				return out
			}
			n := int(binary.BigEndian.Uint16(b[h:]))
			h += 2
			if len(b) < h+n {
				return out
			}
			b = b[h+n:]
			continue
		}
		if len(b) < plaintextHeader {
			return out
		}
		n := int(binary.BigEndian.Uint16(b[11:]))
		if len(b) < plaintextHeader+n {
			return out
		}
		body := b[plaintextHeader : plaintextHeader+n]
		if b[0] == contentHandshake && binary.BigEndian.Uint16(b[3:]) == 0 { // epoch 0
			for len(body) >= handshakeHeader {
				total := int(body[1])<<16 | int(body[2])<<8 | int(body[3])
				off := int(body[6])<<16 | int(body[7])<<8 | int(body[8])
				flen := int(body[9])<<16 | int(body[10])<<8 | int(body[11])
				if len(body) < handshakeHeader+flen {
					break
				}
				out = append(out, fragment{body[0], binary.BigEndian.Uint16(body[4:]), off, total,
					body[handshakeHeader : handshakeHeader+flen]})
				body = body[handshakeHeader+flen:]
			}
		}
		b = b[plaintextHeader+n:]
	}
	return out
}

// serverHello is what a ServerHello or HelloRetryRequest says that the sample reports.
type serverHello struct {
	retry  bool   // a HelloRetryRequest
	cookie bool   // it carries a cookie (the server's stateless address check, RFC 9147 §5.1)
	group  uint16 // the key share's group (ServerHello) or the selected group (HelloRetryRequest); 0: none
}

// parseServerHello reads a whole ServerHello body (RFC 8446 §4.1.3); ok false when it is cut short.
func parseServerHello(b []byte) (h serverHello, ok bool) {
	if len(b) < 2+32+1 {
		return h, false
	}
	h.retry = bytes.Equal(b[2:34], hrrRandom[:])
	p := 34
	p += 1 + int(b[p]) // legacy_session_id_echo
	p += 2 + 1         // cipher_suite, legacy_compression_method
	if len(b) < p+2 {
		return h, false
	}
	end := p + 2 + int(binary.BigEndian.Uint16(b[p:]))
	if len(b) < end {
		return h, false
	}
	for p += 2; p+4 <= end; {
		typ, n := binary.BigEndian.Uint16(b[p:]), int(binary.BigEndian.Uint16(b[p+2:]))
		body := b[p+4 : min(p+4+n, end)]
		switch {
		case typ == extCookie:
			h.cookie = true
		case typ == extKeyShare && len(body) >= 2:
			h.group = binary.BigEndian.Uint16(body)
		}
		p += 4 + n
	}
	return h, true
}

// message reassembles one handshake message from fragments (a retransmitted fragment only fills a gap).
type message struct {
	total int
	data  []byte
	have  []bool
}

func (m *message) add(f fragment) bool {
	if m.data == nil {
		m.total, m.data, m.have = f.total, make([]byte, f.total), make([]bool, f.total)
	}
	if f.total != m.total || f.offset+len(f.data) > m.total {
		return false
	}
	copy(m.data[f.offset:], f.data)
	for i := range f.data {
		m.have[f.offset+i] = true
	}
	for _, h := range m.have {
		if !h {
			return false
		}
	}
	return true
}

// countingConn stamps and keeps every datagram the client's DTLS connection writes and reads.
type countingConn struct {
	net.PacketConn
	mu             sync.Mutex
	sent, received []datagram
}

func (c *countingConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	t := kit.MonoNs()
	n, err := c.PacketConn.WriteTo(p, addr)
	if err == nil {
		c.mu.Lock()
		c.sent = append(c.sent, datagram{t, n, parseDatagram(bytes.Clone(p[:n]))})
		c.mu.Unlock()
	}
	return n, err
}

func (c *countingConn) ReadFrom(p []byte) (int, net.Addr, error) {
	n, addr, err := c.PacketConn.ReadFrom(p)
	if err == nil {
		t := kit.MonoNs()
		c.mu.Lock()
		c.received = append(c.received, datagram{t, n, parseDatagram(bytes.Clone(p[:n]))}) // the caller reuses p
		c.mu.Unlock()
	}
	return n, addr, err
}

func (c *countingConn) snapshot() (sent, received []datagram) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]datagram(nil), c.sent...), append([]datagram(nil), c.received...)
}

// helloCounts: the ClientHellos that left (distinct message_seq) and the datagrams that carried a fragment
// of one (more than the ClientHellos' fragments when one was sent again after a timer).
func helloCounts(sent []datagram) (hellos, datagrams int) {
	seqs := map[uint16]bool{}
	for _, d := range sent {
		carried := false
		for _, f := range d.fragments {
			if f.msgType == msgClientHello {
				seqs[f.seq], carried = true, true
			}
		}
		if carried {
			datagrams++
		}
	}
	return len(seqs), datagrams
}

// serverHellos reassembles the server's HelloRetryRequest and ServerHello from the datagrams read: each
// whole one in order, with the time of the datagram that completed it.
func serverHellos(received []datagram) (out []serverHello, at []int64) {
	msgs := map[uint16]*message{}
	done := map[uint16]bool{}
	for _, d := range received {
		for _, f := range d.fragments {
			if f.msgType != msgServerHello || done[f.seq] {
				continue
			}
			m := msgs[f.seq]
			if m == nil {
				m = &message{}
				msgs[f.seq] = m
			}
			if m.add(f) {
				done[f.seq] = true
				if h, ok := parseServerHello(m.data); ok {
					out, at = append(out, h), append(at, d.t)
				}
			}
		}
	}
	return out, at
}

// firstServerHello is the index of the first datagram read that holds a fragment of a ServerHello that is
// not a HelloRetryRequest (the fragment at offset 0 says which: its random), or -1.
func firstServerHello(received []datagram) int {
	for i, d := range received {
		for _, f := range d.fragments {
			if f.msgType == msgServerHello && f.offset == 0 && len(f.data) >= 34 && !bytes.Equal(f.data[2:34], hrrRandom[:]) {
				return i
			}
		}
	}
	return -1
}

func bytesBefore(ds []datagram, n int) int64 {
	var b int64
	for _, d := range ds[:n] {
		b += int64(d.size)
	}
	return b
}
