package main

// quic-go's qlog events for one client connection, taken as they are recorded (not written anywhere):
//
//   - the Handshake-level packet that carries a CRYPTO frame is the client's Finished (the client has
//     no other Handshake-level CRYPTO data: no client certificate); its datagram checksum names the
//     datagram that carried it (countingConn matches it when the datagram is written);
//   - the server's 1-RTT key becoming available: crypto/tls installs it right after it has read and
//     verified the server's Finished, so that moment is server_finished_received (the time the client
//     had it, as pqtimer's, not the arrival of its datagram).

import (
	"context"
	"sync"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	kit "pqbench/native/gotlskit"
)

type connTrace struct {
	conn *countingConn

	mu             sync.Mutex
	serverFinished int64 // CLOCK_MONOTONIC_RAW ns; 0 = not yet
}

func (t *connTrace) tracer() func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	return func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return t }
}

func (t *connTrace) AddProducer() qlogwriter.Recorder { return t }

func (t *connTrace) Close() error { return nil }

func (t *connTrace) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketSent:
		if e.Header.PacketType == qlog.PacketTypeHandshake && e.DatagramPayloadChecksum != 0 && hasCrypto(e.Frames) {
			t.conn.expectFinished(uint32(e.DatagramPayloadChecksum))
		}
	case qlog.KeyUpdated:
		if e.KeyType == qlog.KeyTypeServer1RTT {
			now := kit.MonoNs()
			t.mu.Lock()
			if t.serverFinished == 0 {
				t.serverFinished = now
			}
			t.mu.Unlock()
		}
	}
}

func hasCrypto(frames []qlog.Frame) bool {
	for _, f := range frames {
		if _, ok := f.Frame.(*qlog.CryptoFrame); ok {
			return true
		}
	}
	return false
}

func (t *connTrace) serverFinishedAt() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.serverFinished
}
