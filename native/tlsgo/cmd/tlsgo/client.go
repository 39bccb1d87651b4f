package main

// The timing client. Each sample reads CLOCK_MONOTONIC_RAW before the TCP connect and records the
// phases crypto/tls lets us see from outside:
//
//	tcp_connected            net.Dialer.Dial returned
//	client_hello_sent        the first write crypto/tls hands the socket (the ClientHello record)
//	server_hello_received    the first read from the socket that returns bytes (the server's first
//	                         flight starts with the ServerHello; the bytes, not their processing)
//	server_finished_received null: crypto/tls shows no point where the server's Finished arrived.
//	                         (Its second write, the client's Finished, comes after the whole server
//	                         flight is verified: another point than pqtimer's, so not reported as it.)
//	handshake_done           Handshake() returned
//	first_byte, last_byte    of the HTTP response(s), page and requests modes
//
// Mode resume, as pqtimer: a priming connection (full handshake and one request, not a sample) gets
// the server's first session ticket; every sample then resumes from that same ticket.
//
// Nothing else is observable without changing crypto/tls, so nothing else is reported. The
// negotiated signature scheme is read from the connection's peerSigAlg field (crypto/tls keeps it
// but exports it only to its own tests); if a future Go renames it, sigalg is null, never guessed.
// A failed sample is printed with its error class, never dropped or retried.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	kit "pqbench/native/gotlskit"
)

type clientOptions struct {
	kit.ClientOptions
	requests int // HTTP requests per connection
}

func parseClientOptions(args []string) *clientOptions {
	o := kit.ParseOptions(args, append(kit.ClientOptionNames, "--requests")...)
	c := &clientOptions{ClientOptions: *kit.ParseClientOptions(o), requests: o.Int("--requests", 1, 1, 100000)}
	switch c.Mode {
	case "handshake":
		c.requests = 0
	case "page":
		c.requests = 1
	case "requests":
	case "resume":
		c.requests = 0
	default:
		kit.Usage("--mode", "allowed: handshake, page, requests, resume")
	}
	return c
}

func clientConfig(o *clientOptions) *tls.Config {
	cfg := o.ClientTLSConfig()
	if o.Mode == "resume" {
		cfg.ClientSessionCache = &oneTicket{}
	}
	return cfg
}

// oneTicket keeps the first session ticket the server sends and offers it for every connection.
type oneTicket struct{ s *tls.ClientSessionState }

func (t *oneTicket) Get(string) (*tls.ClientSessionState, bool) { return t.s, t.s != nil }

func (t *oneTicket) Put(_ string, cs *tls.ClientSessionState) {
	if t.s == nil && cs != nil {
		t.s = cs
	}
}

// primeTicket: one full handshake and one request (the server's tickets precede its response), not
// recorded as a sample.
func primeTicket(cfg *tls.Config, o *clientOptions) error {
	prime := *o
	prime.requests, prime.Mode = 1, "page"
	var s sample
	runSample(cfg, &prime, &s)
	if cfg.ClientSessionCache.(*oneTicket).s == nil {
		cls, msg := "no ticket", ""
		if s.ErrorClass != nil {
			cls, msg = *s.ErrorClass, *s.Error
		}
		return fmt.Errorf("no session ticket from the priming handshake (%s: %s)", cls, msg)
	}
	return nil
}

// Phases in pqtimer's order and names.
const (
	phStart = iota
	phTCPConnected
	phClientHelloSent
	phServerHelloReceived
	phServerFinishedReceived
	phHandshakeDone
	phFirstByte
	phLastByte
	phCount
)

var phaseNames = [phCount]string{"start", "tcp_connected", "client_hello_sent", "server_hello_received",
	"server_finished_received", "handshake_done", "first_byte", "last_byte"}

type trace struct {
	t      [phCount]int64 // CLOCK_MONOTONIC_RAW ns; 0 = not observed
	writes []int64        // times of the writes crypto/tls made during the handshake
}

// tap sees what crypto/tls writes to and reads from the socket, and when.
type tap struct {
	net.Conn
	tr        *trace
	handshake bool // writes are recorded while the handshake runs
}

func (c *tap) Write(b []byte) (int, error) {
	if c.handshake {
		c.tr.writes = append(c.tr.writes, kit.MonoNs())
	}
	return c.Conn.Write(b)
}

func (c *tap) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.tr.t[phServerHelloReceived] == 0 {
		c.tr.t[phServerHelloReceived] = kit.MonoNs()
	}
	return n, err
}

type sample struct {
	kit.SampleHead
	Group        *string    `json:"group"`
	Sigalg       *string    `json:"sigalg"`
	Resumed      bool       `json:"resumed"`
	TCPHandshake *tcpCounts `json:"tcp_handshake"`
	TCPEnd       *tcpCounts `json:"tcp_end"`
	HTTPStatus   *int       `json:"http_status"`
	BodyBytes    int64      `json:"body_bytes"`
	Requests     int        `json:"requests"`
	Cipher       *string    `json:"cipher"`
	HRR          bool       `json:"hello_retry_request"`
	Writes       int        `json:"handshake_writes"` // socket writes crypto/tls made for the handshake
	CPUWaitNs    *int64     `json:"cpu_wait_ns"`      // the process's wait for a CPU during the sample
}

func (s *sample) SetCPUWait(ns int64) { s.CPUWaitNs = &ns }

func classify(err error, during string) (string, string) {
	var ne net.Error
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout", during + " did not complete within the timeout"
	case errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return "cert_verify", "certificate verification failed: " + err.Error()
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE):
		return "closed", during + ": the server closed the connection: " + err.Error()
	default:
		return "tls_error", during + ": " + err.Error()
	}
}

// peerSigAlg reads the signature scheme of the server's CertificateVerify, which crypto/tls records
// in an unexported field (reading it through reflect, never writing).
func peerSigAlg(c *tls.Conn) (tls.SignatureScheme, bool) {
	f := reflect.ValueOf(c).Elem().FieldByName("peerSigAlg")
	if !f.IsValid() || f.Kind() != reflect.Uint16 || f.Uint() == 0 {
		return 0, false
	}
	return tls.SignatureScheme(f.Uint()), true
}

func runSample(cfg *tls.Config, o *clientOptions, s *sample) {
	tr := &trace{}
	var out kit.Outcome
	start := kit.MonoNs()
	tr.t[phStart] = start
	deadline := time.Now().Add(o.Timeout)
	d := net.Dialer{Deadline: deadline} // Go sets TCP_NODELAY on every TCP connection, as pqtimer does
	raw, err := d.Dial("tcp4", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			out.Set("connect_timeout", "TCP connect did not complete within the timeout")
		case errors.Is(err, syscall.ECONNREFUSED):
			out.Set("connect_refused", "connect: %v", err)
		default:
			out.Set("connect_error", "connect: %v", err)
		}
		s.Finish(phaseNames[:], tr.t[:], &out)
		return
	}
	tr.t[phTCPConnected] = kit.MonoNs()
	_ = raw.SetDeadline(deadline)
	conn := &tap{Conn: raw, tr: tr, handshake: true}
	tc := tls.Client(conn, cfg)
	err = tc.Handshake()
	conn.handshake = false
	if err == nil {
		tr.t[phHandshakeDone] = kit.MonoNs()
		s.TCPHandshake = tcpInfo(raw)
		st := tc.ConnectionState()
		g := kit.GroupString(st.CurveID)
		s.Group = &g
		if sa, ok := peerSigAlg(tc); ok {
			n := kit.SigalgString(sa)
			s.Sigalg = &n
		}
		c := tls.CipherSuiteName(st.CipherSuite)
		s.Cipher = &c
		s.HRR = st.HelloRetryRequest
		s.Resumed = st.DidResume
		if o.Mode == "resume" && !st.DidResume {
			out.Set("not_resumed", "the server did not accept the session ticket")
		}
	} else {
		cls, msg := classify(err, "TLS handshake")
		out.Set(cls, "%s", msg)
	}
	s.Writes = len(tr.writes)
	if len(tr.writes) > 0 {
		tr.t[phClientHelloSent] = tr.writes[0]
	}
	for i := 0; err == nil && out.Class == "" && i < o.requests; i++ {
		httpGet(tc, o, tr, s, &out, i == 0)
	}
	if s.Requests > 0 && out.Class == "" {
		tr.t[phLastByte] = kit.MonoNs()
	}
	s.TCPEnd = tcpInfo(raw)
	if p, ok := raw.LocalAddr().(*net.TCPAddr); ok && p.Port != 0 {
		port := p.Port
		s.LocalPort = &port
	}
	if err == nil {
		_ = raw.SetDeadline(time.Now().Add(100 * time.Millisecond))
		_ = tc.Close() // a polite close_notify, not waited for
	} else {
		_ = raw.Close()
	}
	s.Finish(phaseNames[:], tr.t[:], &out)
}

var httpBuf = make([]byte, 1<<16)

// httpGet sends one HTTP/1.1 GET on the connection and reads the response (Content-Length framed),
// recording the first byte of the first response.
func httpGet(tc *tls.Conn, o *clientOptions, tr *trace, s *sample, out *kit.Outcome, first bool) {
	host := o.ServerName
	if host == "" {
		host = o.Host
	}
	req := "GET " + o.Path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: keep-alive\r\n\r\n"
	if _, err := io.WriteString(tc, req); err != nil {
		cls, msg := classify(err, "sending the HTTP request")
		out.Set(cls, "%s", msg)
		return
	}
	have, headerEnd := 0, -1
	contentLength, body := int64(-1), int64(0)
	for {
		n, err := tc.Read(httpBuf[have:])
		if n > 0 && first && tr.t[phFirstByte] == 0 {
			tr.t[phFirstByte] = kit.MonoNs()
		}
		if n == 0 && err != nil {
			cls, msg := classify(err, "reading the HTTP response")
			out.Set(cls, "%s", msg)
			return
		}
		if headerEnd < 0 {
			have += n
			i := strings.Index(string(httpBuf[:have]), "\r\n\r\n")
			if i < 0 {
				if have == len(httpBuf) {
					out.Set("http_error", "response headers too long")
					return
				}
				continue
			}
			headerEnd = i + 4
			head := string(httpBuf[:i])
			status := 0
			if _, err := fmt.Sscanf(head, "HTTP/1.%d %d", new(int), &status); err != nil {
				out.Set("http_error", "not an HTTP response")
				return
			}
			s.HTTPStatus = &status
			for _, line := range strings.Split(head, "\r\n")[1:] {
				k, v, ok := strings.Cut(line, ":")
				if ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
					contentLength, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				}
			}
			if contentLength < 0 {
				out.Set("http_error", "response without Content-Length")
				return
			}
			body = int64(have - headerEnd)
			have = 0
		} else {
			body += int64(n)
		}
		if body >= contentLength {
			break
		}
	}
	s.BodyBytes += body
	s.Requests++
	if *s.HTTPStatus != 200 {
		out.Set("http_status", "HTTP status %d", *s.HTTPStatus)
	}
}

func clientMain(args []string) int {
	o := parseClientOptions(args)
	cfg := clientConfig(o)
	if o.Mode == "resume" {
		if err := primeTicket(cfg, o); err != nil {
			fmt.Fprintf(os.Stderr, "tlsgo: resume: %v\n", err)
			return 1
		}
	}
	return kit.RunSamples(&o.ClientOptions, func(i int) kit.Sample {
		s := &sample{SampleHead: kit.SampleHead{Worker: o.Worker, I: i, Mode: o.Mode}}
		runSample(cfg, o, s)
		return s
	})
}
