package main

// What the client's UDP socket carries, seen from just above the socket: every datagram quic-go
// writes or reads, when, how big, and which QUIC packet types it holds (the long header's type bits
// are not header-protected, so they are read here without keys).
//
// countingConn wraps the *net.UDPConn and deliberately offers quic-go no ReadMsgUDP/WriteMsgUDP: quic-go
// then takes its plain path, one WriteTo per datagram and one ReadFrom per datagram (no GSO, no
// batched recvmmsg, no ECN), so one write here is one datagram on the wire and in the emulator. It
// keeps SyscallConn, so quic-go still sets the Don't Fragment bit as on a bare socket.

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"sync"
	"syscall"
	"time"

	kit "pqbench/native/gotlskit"
)

// Kinds of QUIC packets a datagram holds (a bit each).
const (
	kindInitial uint8 = 1 << iota
	kindZeroRTT
	kindHandshake
	kindRetry
	kindShort // a 1-RTT packet (short header): always the last in its datagram
	kindVersionNegotiation
	kindUnparsed // bytes that are not a QUIC packet (or a truncated one)
)

const (
	quicV1 = 0x00000001
	quicV2 = 0x6b3343cf // RFC 9369 moves the long header's type codes
)

// longType maps a long header's 2 type bits to a kind, per version.
func longType(version uint32, bits byte) uint8 {
	if version == quicV2 {
		return [4]uint8{kindRetry, kindInitial, kindZeroRTT, kindHandshake}[bits]
	}
	return [4]uint8{kindInitial, kindZeroRTT, kindHandshake, kindRetry}[bits]
}

// varint reads a QUIC variable-length integer (RFC 9000 §16); ok false when b is too short.
func varint(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0, false
	}
	v = uint64(b[0] & 0x3f)
	for i := 1; i < n; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v, n, true
}

// packetKinds lists the packet types of a datagram, walking coalesced long-header packets by their
// Length fields.
func packetKinds(b []byte) uint8 {
	var kinds uint8
	for len(b) > 0 {
		if b[0]&0x80 == 0 {
			return kinds | kindShort
		}
		if len(b) < 7 {
			return kinds | kindUnparsed
		}
		version := binary.BigEndian.Uint32(b[1:5])
		if version == 0 {
			return kinds | kindVersionNegotiation
		}
		p := 5
		dcid := int(b[p])
		p += 1 + dcid
		if p >= len(b) {
			return kinds | kindUnparsed
		}
		scid := int(b[p])
		p += 1 + scid
		if p > len(b) {
			return kinds | kindUnparsed
		}
		kind := longType(version, (b[0]>>4)&3)
		kinds |= kind
		if kind == kindRetry {
			return kinds // a Retry has no Length field and fills its datagram
		}
		if kind == kindInitial {
			tok, n, ok := varint(b[p:])
			if !ok || uint64(len(b)-p-n) < tok {
				return kinds | kindUnparsed
			}
			p += n + int(tok)
		}
		length, n, ok := varint(b[p:])
		if !ok || uint64(len(b)-p-n) < length {
			return kinds | kindUnparsed
		}
		b = b[p+n+int(length):]
	}
	return kinds
}

// datagram: one UDP payload written or read by quic-go.
type datagram struct {
	t     int64  // CLOCK_MONOTONIC_RAW ns when the write was handed to the kernel / the read returned
	size  int    // UDP payload bytes
	kinds uint8  // packetKinds
	sum   uint32 // CRC-32C of the payload (sent datagrams, until the client's Finished is found): qlog's
	//              datagram checksum, which ties a packet quic-go logs to the datagram that carried it
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type countingConn struct {
	udp *net.UDPConn

	mu       sync.Mutex
	sent     []datagram
	received []datagram
	summing  bool          // checksums of sent datagrams are needed (the Finished is not found yet)
	want     uint32        // the checksum of the datagram that carries the client's Finished, once known
	wantSet  bool          // want is valid
	found    chan struct{} // closed when a datagram with checksum want has been written
	closedF  bool
}

func newCountingConn(udp *net.UDPConn) *countingConn {
	return &countingConn{udp: udp, summing: true, found: make(chan struct{})}
}

func (c *countingConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	d := datagram{size: len(b), kinds: packetKinds(b)}
	c.mu.Lock()
	summing := c.summing
	c.mu.Unlock()
	if summing {
		d.sum = crc32.Checksum(b, castagnoli)
	}
	d.t = kit.MonoNs()
	n, err := c.udp.WriteTo(b, addr)
	c.mu.Lock()
	if err == nil {
		c.sent = append(c.sent, d)
		c.check(d)
	}
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := c.udp.ReadFrom(b)
	if n > 0 {
		d := datagram{t: kit.MonoNs(), size: n, kinds: packetKinds(b[:n])}
		c.mu.Lock()
		c.received = append(c.received, d)
		c.mu.Unlock()
	}
	return n, addr, err
}

// expectFinished: qlog says the client's Finished left in a datagram with this checksum (it is logged
// just before the datagram is written, so the write is checked here as it happens).
func (c *countingConn) expectFinished(sum uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wantSet {
		return
	}
	c.want, c.wantSet = sum, true
	for _, d := range c.sent {
		c.check(d)
	}
}

func (c *countingConn) check(d datagram) {
	if c.wantSet && !c.closedF && c.summing && d.sum == c.want {
		c.closedF, c.summing = true, false
		close(c.found)
	}
}

// finishedDatagram: the index of the first sent datagram that carried the client's Finished, or -1.
func (c *countingConn) finishedDatagram() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.wantSet {
		return -1
	}
	for i, d := range c.sent {
		if d.sum == c.want && d.sum != 0 {
			return i
		}
	}
	return -1
}

// snapshot copies what was recorded so far.
func (c *countingConn) snapshot() (sent, received []datagram) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]datagram(nil), c.sent...), append([]datagram(nil), c.received...)
}

func (c *countingConn) Close() error                       { return c.udp.Close() }
func (c *countingConn) LocalAddr() net.Addr                { return c.udp.LocalAddr() }
func (c *countingConn) SetDeadline(t time.Time) error      { return c.udp.SetDeadline(t) }
func (c *countingConn) SetReadDeadline(t time.Time) error  { return c.udp.SetReadDeadline(t) }
func (c *countingConn) SetWriteDeadline(t time.Time) error { return c.udp.SetWriteDeadline(t) }
func (c *countingConn) SetReadBuffer(n int) error          { return c.udp.SetReadBuffer(n) }
func (c *countingConn) SetWriteBuffer(n int) error         { return c.udp.SetWriteBuffer(n) }

// SyscallConn lets quic-go set the Don't Fragment bit and the buffer sizes, as on a bare socket.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) { return c.udp.SyscallConn() }

// firstWith is the first datagram (index) holding a packet of kind k, or -1.
func firstWith(ds []datagram, k uint8) int {
	for i, d := range ds {
		if d.kinds&k != 0 {
			return i
		}
	}
	return -1
}

// bytesBefore: UDP payload bytes of the datagrams before index i.
func bytesBefore(ds []datagram, i int) int64 {
	var n int64
	for _, d := range ds[:i] {
		n += int64(d.size)
	}
	return n
}
