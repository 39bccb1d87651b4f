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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
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
	host, path, cafile, servername string
	port, count, warmup, worker    int
	initialSize                    int // 0: quic-go's default
	timeout, pause                 time.Duration
	mode                           string
	groups                         []tls.CurveID
	claims                         *claims
}

func parseClientOptions(args []string) *clientOptions {
	o := parseOptions(args, "--host", "--port", "--mode", "--path", "--groups", "--cafile", "--servername",
		"--count", "--warmup", "--timeout-ms", "--worker", "--claim", "--pause-ms", "--transport", "--initial-size")
	c := &clientOptions{
		host: o.required("--host"), port: o.int("--port", 0, 1, 65535), path: o.str("--path", "/"),
		cafile: o.str("--cafile", ""), servername: o.str("--servername", ""),
		count: o.int("--count", 1, 1, 100000000), warmup: o.int("--warmup", 0, 0, 1000000),
		worker:      o.int("--worker", 0, 0, 1<<31-1),
		timeout:     time.Duration(o.int("--timeout-ms", 10000, 1, 3600000)) * time.Millisecond,
		pause:       time.Duration(o.int("--pause-ms", 0, 0, 3600000)) * time.Millisecond,
		mode:        o.str("--mode", "handshake"),
		initialSize: o.int("--initial-size", 0, minInitialSize, maxInitialSize),
	}
	if c.port == 0 {
		usage("--port", "required")
	}
	if ip := net.ParseIP(c.host); ip == nil || ip.To4() == nil {
		usage("--host", "must be an IPv4 address")
	}
	if t := o.str("--transport", "quic"); t != "quic" {
		usage("--transport", fmt.Sprintf("%q: quicgo speaks only quic", t))
	}
	if c.mode != "handshake" && c.mode != "page" {
		usage("--mode", "allowed: handshake, page")
	}
	groups, err := parseGroups(o.str("--groups", "X25519MLKEM768:x25519"))
	if err != nil {
		usage("--groups", err.Error())
	}
	c.groups = groups
	if p := o.str("--claim", ""); p != "" {
		cl, err := mapClaims(p)
		if err != nil {
			usage("--claim", err.Error())
		}
		c.claims = cl
	}
	return c
}

func clientTLSConfig(o *clientOptions) *tls.Config {
	cfg := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		MaxVersion:       tls.VersionTLS13,
		CurvePreferences: o.groups, // offered: only these, one key share each
		ServerName:       o.servername,
		NextProtos:       []string{http3.NextProtoH3}, // the server serves HTTP/3 in every mode
	}
	if o.servername == "" {
		cfg.ServerName = o.host
	}
	if o.cafile != "" {
		pem, err := os.ReadFile(o.cafile)
		if err != nil {
			usage("--cafile", err.Error())
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			usage("--cafile", "no PEM certificate in this file")
		}
		cfg.RootCAs = pool
	} else {
		cfg.InsecureSkipVerify = true // as pqtimer without --cafile: no verification
	}
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

// orderedPhases prints t_ns in phase order, ns since start, null where not observed in this sample.
type orderedPhases [phCount]int64

func (p orderedPhases) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range phaseNames {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: ", name)
		if i == phStart {
			b.WriteString("0")
		} else if p[i] == 0 {
			b.WriteString("null")
		} else {
			b.WriteString(strconv.FormatInt(p[i]-p[phStart], 10))
		}
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

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

type milestone struct {
	Dir    string `json:"dir"`
	Offset int64  `json:"offset"`
	Edge   string `json:"edge"`
}

type sample struct {
	Worker        int           `json:"worker"`
	I             int           `json:"i"`
	Mode          string        `json:"mode"`
	OK            bool          `json:"ok"`
	ErrorClass    *string       `json:"error_class"`
	Error         *string       `json:"error"`
	TNs           orderedPhases `json:"t_ns"`
	StartMonoNs   int64         `json:"start_mono_ns"`
	LocalPort     *int          `json:"local_port"`
	Transport     string        `json:"transport"`
	Group         *string       `json:"group"`
	Sigalg        *string       `json:"sigalg"`
	Cipher        *string       `json:"cipher"`
	Resumed       bool          `json:"resumed"`
	HRR           bool          `json:"hello_retry_request"`
	HTTPStatus    *int          `json:"http_status"`
	BodyBytes     int64         `json:"body_bytes"`
	Requests      int           `json:"requests"`
	QUIC          *quicCounts   `json:"quic"`
	WireMilestone *milestone    `json:"wire_milestone"`
	CPUWaitNs     *int64        `json:"cpu_wait_ns"` // the process's wait for a CPU during the sample
}

type outcome struct{ class, msg string }

func (o *outcome) set(class, format string, a ...any) {
	if o.class == "" { // keep the first cause
		o.class, o.msg = class, fmt.Sprintf(format, a...)
	}
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
	var out outcome
	s.Transport = "quic"
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t[phStart] = monoNs()
		out.set("connect_error", "UDP socket: %v", err)
		finish(s, t, &out)
		return
	}
	cc := newCountingConn(udp)
	tr := &quic.Transport{Conn: cc}
	trace := &connTrace{conn: cc}
	qcfg := &quic.Config{
		HandshakeIdleTimeout: o.timeout,
		MaxIdleTimeout:       o.timeout,
		InitialPacketSize:    uint16(o.initialSize),
		Tracer:               trace.tracer(),
	}
	if p, ok := udp.LocalAddr().(*net.UDPAddr); ok && p.Port != 0 {
		port := p.Port
		s.LocalPort = &port
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	t[phStart] = monoNs()
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
		g := groupString(st.TLS.CurveID)
		s.Group = &g
		if sa, ok := peerSigAlg(conn); ok {
			n := sigalgString(sa)
			s.Sigalg = &n
		}
		cs := tls.CipherSuiteName(st.TLS.CipherSuite)
		s.Cipher = &cs
		s.HRR = st.TLS.HelloRetryRequest
		s.Resumed = st.TLS.DidResume
		s.QUIC = &quicCounts{Version: fmt.Sprintf("0x%08x", uint32(st.Version)), GSO: st.GSO}
		if o.mode == "page" {
			c.get(ctx, conn, &t, s, &out)
		}
	} else {
		cls, msg := classify(err, "QUIC handshake")
		out.set(cls, "%s", msg)
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
	if err == nil && out.class == "" {
		switch {
		case o.mode == "handshake" && fin >= 0:
			s.WireMilestone = &milestone{"c2s", bytesBefore(sent, fin), "first"}
		case o.mode == "handshake":
			out.set("no_finished", "quic-go's log named no datagram carrying the client's Finished")
		case o.mode == "page":
			// the datagram that completed the response: the last one read before the body's end was seen
			last := -1
			for i, d := range received {
				if d.t <= t[phLastByte] {
					last = i
				}
			}
			if last >= 0 {
				s.WireMilestone = &milestone{"s2c", bytesBefore(received, last), "first"}
			}
		}
	}
	if conn != nil {
		_ = conn.CloseWithError(0, "") // a CONNECTION_CLOSE, not waited for
	}
	_ = tr.Close()
	_ = udp.Close()
	finish(s, t, &out)
}

// get fetches the page with one HTTP/3 GET on the connection.
func (c *client) get(ctx context.Context, conn *quic.Conn, t *[phCount]int64, s *sample, out *outcome) {
	host := c.o.servername
	if host == "" {
		host = c.o.host
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+c.o.path, nil)
	if err != nil {
		out.set("http_error", "request: %v", err)
		return
	}
	h3 := (&http3.Transport{}).NewClientConn(conn)
	resp, err := h3.RoundTrip(req)
	if err != nil {
		cls, msg := classify(err, "the HTTP/3 request")
		out.set(cls, "%s", msg)
		return
	}
	t[phFirstByte] = monoNs()
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		cls, msg := classify(err, "reading the HTTP/3 response")
		out.set(cls, "%s", msg)
		return
	}
	t[phLastByte] = monoNs()
	status := resp.StatusCode
	s.HTTPStatus, s.BodyBytes, s.Requests = &status, n, 1
	if status != 200 {
		out.set("http_status", "HTTP status %d", status)
	}
}

func finish(s *sample, t [phCount]int64, out *outcome) {
	s.TNs = orderedPhases(t)
	s.StartMonoNs = t[phStart]
	s.OK = out.class == ""
	if !s.OK {
		s.ErrorClass, s.Error = &out.class, &out.msg
	}
}

func clientMain(args []string) int {
	o := parseClientOptions(args)
	c := &client{o: o, tlsCfg: clientTLSConfig(o),
		addr: &net.UDPAddr{IP: net.ParseIP(o.host), Port: o.port}}
	enc := json.NewEncoder(os.Stdout) // one line per sample, written (unbuffered) as it is made
	failures := 0
	for k := -o.warmup; ; k++ {
		i := k
		if k >= 0 && o.claims != nil {
			i = o.claims.next()
		}
		if i >= o.count {
			break
		}
		s := sample{Worker: o.worker, I: i, Mode: o.mode}
		wait0 := cpuWaitNs()
		c.runSample(&s)
		if wait1 := cpuWaitNs(); wait0 >= 0 && wait1 >= wait0 {
			d := wait1 - wait0
			s.CPUWaitNs = &d
		}
		if i < 0 {
			continue // warm-up: not recorded
		}
		if err := enc.Encode(&s); err != nil {
			fmt.Fprintf(os.Stderr, "quicgo: cannot write the sample: %v\n", err)
			return 3
		}
		if !s.OK {
			failures++
		}
		time.Sleep(o.pause)
	}
	if failures > 0 {
		return 1
	}
	return 0
}
