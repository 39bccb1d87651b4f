package main

// The timing client: one QUIC connection (its own UDP socket and source port) per sample. Each sample
// reads CLOCK_MONOTONIC_RAW before dialing and records what the socket and quic-go's qlog events show:
//
//	client_hello_sent          the first datagram written (the first Initial, with the ClientHello)
//	server_hello_received      the first datagram read that holds a server Initial packet (its
//	                           ServerHello; after a Retry, the Initial that follows it)
//	handshake_packet_received  the first datagram read that holds a Handshake packet
//	server_finished_received   quic-go got the server's 1-RTT key: crypto/tls has read and verified
//	                           the server's Finished (qlog key_updated)
//	handshake_done             the datagram carrying the client's Finished was written (qlog names the
//	                           Handshake packet with CRYPTO data; its datagram checksum names the write)
//	first_byte, last_byte      page mode: the HTTP/3 response's headers arrived (RoundTrip returned),
//	                           the body's end was read
//
// tcp_connected does not exist over QUIC and is not printed. Everything else comes from counting the
// datagrams (wire.go). A failed sample is printed with its error class, never dropped or retried.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	kit "pqbench/native/gotlskit"
)

// quic-go's bounds for an Initial datagram: RFC 9000's 1200 minimum, its packet buffer's 1452 maximum
// (it would silently clamp other values; asked sizes outside are refused instead).
const (
	minInitialSize = 1200
	maxInitialSize = 1452
)

// How long after Dial returns the client waits for its Finished's datagram to be written (microseconds
// in practice); past it the sample fails as no_finished rather than waiting for the whole timeout.
const finishedWait = 2 * time.Second

type clientOptions struct {
	kit.ClientOptions
	initialSize int // 0: quic-go's default
}

func parseClientOptions(args []string) *clientOptions {
	o := kit.ParseOptions(args, append(kit.ClientOptionNames, "--transport", "--initial-size")...)
	c := &clientOptions{ClientOptions: *kit.ParseClientOptions(o),
		initialSize: o.Int("--initial-size", 0, minInitialSize, maxInitialSize)}
	if t := o.Str("--transport", "quic"); t != "quic" {
		kit.Usage("--transport", fmt.Sprintf("%q: quicgo speaks only quic", t))
	}
	if c.Mode != "handshake" && c.Mode != "page" {
		kit.Usage("--mode", "allowed: handshake, page")
	}
	return c
}

func clientTLSConfig(o *clientOptions) *tls.Config {
	cfg := o.ClientTLSConfig()
	cfg.NextProtos = []string{http3.NextProtoH3} // the server serves HTTP/3 in every mode
	return cfg
}

// Phases in the QUIC sample's order and names.
const (
	phStart = iota
	phClientHelloSent
	phServerHelloReceived
	phHandshakePacketReceived
	phServerFinishedReceived
	phHandshakeDone
	phFirstByte
	phLastByte
	phCount
)

var phaseNames = [phCount]string{"start", "client_hello_sent", "server_hello_received", "handshake_packet_received",
	"server_finished_received", "handshake_done", "first_byte", "last_byte"}

type quicCounts struct {
	DatagramsSent     int    `json:"datagrams_sent"`
	DatagramsReceived int    `json:"datagrams_received"`
	BytesSent         int64  `json:"bytes_sent"`     // UDP payload bytes
	BytesReceived     int64  `json:"bytes_received"` // UDP payload bytes
	InitialSize       *int   `json:"initial_size"`   // UDP payload of the client's first datagram
	Retry             bool   `json:"retry"`          // the server answered the first Initial with a Retry
	Version           string `json:"version"`        // QUIC version, 0x%08x (0x00000001: RFC 9000)
	GSO               bool   `json:"gso"`            // quic-go's own word that it sent with segmentation offload
	// packet types per datagram in order ("I", "H", "1" for 1-RTT, "R" Retry, "0" 0-RTT, "V" Version
	// Negotiation, "?" unparsed, joined by "+" when coalesced), up to the handshake's end
	SentKinds     []string `json:"sent_kinds"`
	ReceivedKinds []string `json:"received_kinds"`
}

func (s *sample) SetCPUWait(ns int64) { s.CPUWaitNs = &ns }

type sample struct {
	kit.SampleHead
	Transport     string             `json:"transport"`
	Group         *string            `json:"group"`
	Sigalg        *string            `json:"sigalg"`
	Cipher        *string            `json:"cipher"`
	Resumed       bool               `json:"resumed"`
	HRR           bool               `json:"hello_retry_request"`
	HTTPStatus    *int               `json:"http_status"`
	BodyBytes     int64              `json:"body_bytes"`
	Requests      int                `json:"requests"`
	QUIC          *quicCounts        `json:"quic"`
	WireMilestone *kit.WireMilestone `json:"wire_milestone"`
	CPUWaitNs     *int64             `json:"cpu_wait_ns"` // the process's wait for a CPU during the sample
}

func classify(err error, during string) (string, string) {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var idle *quic.IdleTimeoutError
	var hst *quic.HandshakeTimeoutError
	var te *quic.TransportError
	var ae *quic.ApplicationError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &idle), errors.As(err, &hst):
		return "timeout", during + " did not complete within the timeout"
	case errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return "cert_verify", "certificate verification failed: " + err.Error()
	case errors.As(err, &te) && te.ErrorCode.IsCryptoError():
		return "tls_error", during + ": " + err.Error()
	case errors.As(err, &te), errors.As(err, &ae):
		return "quic_error", during + ": " + err.Error()
	default:
		return "quic_error", during + ": " + err.Error()
	}
}

// peerSigAlg reads the signature scheme of the server's CertificateVerify. crypto/tls keeps it in an
// unexported field of its Conn (under the tls.QUICConn quic-go holds, under the quic.Conn): found by
// walking the connection's fields with reflect (read only). If it moves, sigalg is null, never guessed.
func peerSigAlg(conn *quic.Conn) (tls.SignatureScheme, bool) {
	want := reflect.TypeOf(tls.Conn{})
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value, depth int) (tls.SignatureScheme, bool)
	walk = func(v reflect.Value, depth int) (tls.SignatureScheme, bool) {
		if depth > 6 {
			return 0, false
		}
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				return walk(v.Elem(), depth)
			}
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return 0, false
			}
			seen[v.Pointer()] = true
			return walk(v.Elem(), depth+1)
		case reflect.Struct:
			if v.Type() == want {
				f := v.FieldByName("peerSigAlg")
				if f.IsValid() && f.Kind() == reflect.Uint16 && f.Uint() != 0 {
					return tls.SignatureScheme(f.Uint()), true
				}
				return 0, false
			}
			for i := 0; i < v.NumField(); i++ {
				if s, ok := walk(v.Field(i), depth); ok {
					return s, true
				}
			}
		}
		return 0, false
	}
	return walk(reflect.ValueOf(conn), 0)
}

func kindString(k uint8) string {
	var parts []string
	for _, x := range []struct {
		bit  uint8
		name string
	}{{kindInitial, "I"}, {kindZeroRTT, "0"}, {kindHandshake, "H"}, {kindRetry, "R"}, {kindShort, "1"},
		{kindVersionNegotiation, "V"}, {kindUnparsed, "?"}} {
		if k&x.bit != 0 {
			parts = append(parts, x.name)
		}
	}
	return strings.Join(parts, "+")
}

type client struct {
	o      *clientOptions
	tlsCfg *tls.Config
	addr   *net.UDPAddr
}

func (c *client) runSample(s *sample) {
	o := c.o
	var t [phCount]int64
	var out kit.Outcome
	s.Transport = "quic"
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t[phStart] = kit.MonoNs()
		out.Set("connect_error", "UDP socket: %v", err)
		s.Finish(phaseNames[:], t[:], &out)
		return
	}
	cc := newCountingConn(udp)
	tr := &quic.Transport{Conn: cc}
	trace := &connTrace{conn: cc}
	qcfg := &quic.Config{
		HandshakeIdleTimeout: o.Timeout,
		MaxIdleTimeout:       o.Timeout,
		InitialPacketSize:    uint16(o.initialSize),
		Tracer:               trace.tracer(),
	}
	if p, ok := udp.LocalAddr().(*net.UDPAddr); ok && p.Port != 0 {
		port := p.Port
		s.LocalPort = &port
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	t[phStart] = kit.MonoNs()
	conn, err := tr.Dial(ctx, c.addr, c.tlsCfg, qcfg)
	if err == nil {
		// Dial returns when crypto/tls is done; the Finished's datagram may still be on its way out.
		wait := time.NewTimer(finishedWait)
		select {
		case <-cc.found:
		case <-ctx.Done():
		case <-wait.C:
		}
		wait.Stop()
		st := conn.ConnectionState()
		g := kit.GroupString(st.TLS.CurveID)
		s.Group = &g
		if sa, ok := peerSigAlg(conn); ok {
			n := kit.SigalgString(sa)
			s.Sigalg = &n
		}
		cs := tls.CipherSuiteName(st.TLS.CipherSuite)
		s.Cipher = &cs
		s.HRR = st.TLS.HelloRetryRequest
		s.Resumed = st.TLS.DidResume
		s.QUIC = &quicCounts{Version: fmt.Sprintf("0x%08x", uint32(st.Version)), GSO: st.GSO}
		if o.Mode == "page" {
			c.get(ctx, conn, &t, s, &out)
		}
	} else {
		cls, msg := classify(err, "QUIC handshake")
		out.Set(cls, "%s", msg)
	}
	sent, received := cc.snapshot()
	if s.QUIC == nil {
		s.QUIC = &quicCounts{}
	}
	q := s.QUIC
	q.DatagramsSent, q.DatagramsReceived = len(sent), len(received)
	q.BytesSent, q.BytesReceived = bytesBefore(sent, len(sent)), bytesBefore(received, len(received))
	if len(sent) > 0 {
		t[phClientHelloSent] = sent[0].t
		n := sent[0].size
		q.InitialSize = &n
	}
	q.Retry = firstWith(received, kindRetry) >= 0
	if i := firstWith(received, kindInitial); i >= 0 {
		t[phServerHelloReceived] = received[i].t
	}
	if i := firstWith(received, kindHandshake); i >= 0 {
		t[phHandshakePacketReceived] = received[i].t
	}
	t[phServerFinishedReceived] = trace.serverFinishedAt()
	fin := cc.finishedDatagram()
	if fin >= 0 {
		t[phHandshakeDone] = sent[fin].t
	}
	for i, d := range sent {
		if fin >= 0 && i > fin {
			break
		}
		q.SentKinds = append(q.SentKinds, kindString(d.kinds))
	}
	for _, d := range received {
		if t[phHandshakeDone] != 0 && d.t > t[phHandshakeDone] {
			break
		}
		q.ReceivedKinds = append(q.ReceivedKinds, kindString(d.kinds))
	}
	if err == nil && out.Class == "" {
		switch {
		case o.Mode == "handshake" && fin >= 0:
			s.WireMilestone = &kit.WireMilestone{Dir: "c2s", Offset: bytesBefore(sent, fin), Edge: "first"}
		case o.Mode == "handshake":
			out.Set("no_finished", "quic-go's log named no datagram carrying the client's Finished")
		case o.Mode == "page":
			// the datagram that completed the response: the last one read before the body's end was seen
			last := -1
			for i, d := range received {
				if d.t <= t[phLastByte] {
					last = i
				}
			}
			if last >= 0 {
				s.WireMilestone = &kit.WireMilestone{Dir: "s2c", Offset: bytesBefore(received, last), Edge: "first"}
			}
		}
	}
	if conn != nil {
		_ = conn.CloseWithError(0, "") // a CONNECTION_CLOSE, not waited for
	}
	_ = tr.Close()
	_ = udp.Close()
	s.Finish(phaseNames[:], t[:], &out)
}

// get fetches the page with one HTTP/3 GET on the connection.
func (c *client) get(ctx context.Context, conn *quic.Conn, t *[phCount]int64, s *sample, out *kit.Outcome) {
	host := c.o.ServerName
	if host == "" {
		host = c.o.Host
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+c.o.Path, nil)
	if err != nil {
		out.Set("http_error", "request: %v", err)
		return
	}
	h3 := (&http3.Transport{}).NewClientConn(conn)
	resp, err := h3.RoundTrip(req)
	if err != nil {
		cls, msg := classify(err, "the HTTP/3 request")
		out.Set(cls, "%s", msg)
		return
	}
	t[phFirstByte] = kit.MonoNs()
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		cls, msg := classify(err, "reading the HTTP/3 response")
		out.Set(cls, "%s", msg)
		return
	}
	t[phLastByte] = kit.MonoNs()
	status := resp.StatusCode
	s.HTTPStatus, s.BodyBytes, s.Requests = &status, n, 1
	if status != 200 {
		out.Set("http_status", "HTTP status %d", status)
	}
}

func clientMain(args []string) int {
	o := parseClientOptions(args)
	c := &client{o: o, tlsCfg: clientTLSConfig(o),
		addr: &net.UDPAddr{IP: net.ParseIP(o.Host), Port: o.Port}}
	return kit.RunSamples(&o.ClientOptions, func(i int) kit.Sample {
		s := &sample{SampleHead: kit.SampleHead{Worker: o.Worker, I: i, Mode: o.Mode}}
		c.runSample(s)
		return s
	})
}
