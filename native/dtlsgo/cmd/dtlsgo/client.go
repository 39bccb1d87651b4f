package main

// The timing client: one DTLS 1.3 connection (its own UDP socket and source port) per sample, pion/dtls
// with pqtimer's command line. Each sample reads CLOCK_MONOTONIC_RAW before its first datagram and stamps
// what its socket wrote and read (wire.go):
//
//	client_hello_sent      the first datagram written (the ClientHello, or its first fragment)
//	server_hello_received  the first datagram read holding a ServerHello that is not a HelloRetryRequest
//	handshake_done         the last datagram written before the handshake returned: the one carrying the
//	                       client's Finished (the last message of its last flight)
//
// tcp_connected does not exist over UDP; the server's encrypted flight (EncryptedExtensions … Finished) is
// not readable on the socket, so no phase is printed for it. The group is the one the server's ServerHello
// names in its key share (read off the datagram, not asked of pion); the signature scheme is the one a
// TLS 1.3 CertificateVerify must use for the leaf's key (ECDSA on its curve, Ed25519), null where the key
// allows several (RSA). A failed sample is printed with its error class, never dropped or retried.

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/pion/dtls/v4"
	"github.com/pion/dtls/v4/pkg/crypto/elliptic"
	"github.com/pion/dtls/v4/pkg/protocol"

	kit "pqbench/native/gotlskit"
)

// Phases in the DTLS sample's order and names.
const (
	phStart = iota
	phClientHelloSent
	phServerHelloReceived
	phHandshakeDone
	phCount
)

var phaseNames = [phCount]string{"start", "client_hello_sent", "server_hello_received", "handshake_done"}

const defaultMTU = 1200 // pion's own default: the handshake is cut into datagrams of at most this many bytes

type clientOptions struct {
	kit.ClientOptions
	mtu int
}

func parseClientOptions(args []string) *clientOptions {
	o := kit.ParseOptions(args, append(kit.ClientOptionNames, "--transport", "--mtu")...)
	c := &clientOptions{ClientOptions: *kit.ParseClientOptions(o), mtu: o.Int("--mtu", defaultMTU, 256, 65507)}
	if t := o.Str("--transport", "udp"); t != "udp" {
		kit.Usage("--transport", fmt.Sprintf("%q: dtlsgo speaks only udp", t))
	}
	if c.Mode != "handshake" {
		kit.Usage("--mode", "allowed: handshake")
	}
	return c
}

type dtlsCounts struct {
	DatagramsSent     int   `json:"datagrams_sent"`
	DatagramsReceived int   `json:"datagrams_received"`
	BytesSent         int64 `json:"bytes_sent"`     // UDP payload bytes, to the handshake's end
	BytesReceived     int64 `json:"bytes_received"` // UDP payload bytes, to the handshake's end
	ClientHellos      int   `json:"client_hellos"`  // 2 after a HelloRetryRequest (a cookie, another group)
	// datagrams that carried a ClientHello fragment: more than the ClientHellos' fragments when one was
	// sent again after its timer expired
	ClientHelloDatagrams int  `json:"client_hello_datagrams"`
	Cookie               bool `json:"cookie"` // the server's HelloRetryRequest carried a cookie
	MTU                  int  `json:"mtu"`
	lastSize             int  // the last datagram's bytes (the client's Finished)
}

type sample struct {
	kit.SampleHead
	Transport     string             `json:"transport"`
	Group         *string            `json:"group"`
	Sigalg        *string            `json:"sigalg"`
	Cipher        *string            `json:"cipher"`
	HRR           bool               `json:"hrr"`
	DTLS          *dtlsCounts        `json:"dtls"`
	WireMilestone *kit.WireMilestone `json:"wire_milestone"`
	CPUWaitNs     *int64             `json:"cpu_wait_ns"`
	phases        [phCount]int64
}

func (s *sample) SetCPUWait(ns int64) { s.CPUWaitNs = &ns }

func classify(err error) (string, string) {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout", "the DTLS handshake did not complete within the timeout"
	case errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return "cert_verify", "certificate verification failed: " + err.Error()
	default:
		return "tls_error", "DTLS handshake: " + err.Error()
	}
}

// leafSigalg: the signature scheme TLS 1.3 allows a CertificateVerify with this leaf's key, where only one is
// (RFC 8446 §4.2.3: ECDSA names its curve, Ed25519 is one scheme).
func leafSigalg(der []byte) (tls.SignatureScheme, bool) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return 0, false
	}
	switch k := cert.PublicKey.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve.Params().BitSize {
		case 256:
			return tls.ECDSAWithP256AndSHA256, true
		case 384:
			return tls.ECDSAWithP384AndSHA384, true
		case 521:
			return tls.ECDSAWithP521AndSHA512, true
		}
	case ed25519.PublicKey:
		return tls.Ed25519, true
	}
	return 0, false
}

// clientConfig: DTLS 1.3 only, the asked groups (a key share for the first), verifying against --cafile when
// given (else, as pqtimer without --cafile, not at all).
func clientConfig(o *clientOptions) ([]dtls.ClientOption, error) {
	curves := make([]elliptic.Curve, len(o.Groups))
	for i, g := range o.Groups {
		curves[i] = elliptic.Curve(g)
	}
	name := o.ServerName
	if name == "" {
		name = o.Host
	}
	opts := []dtls.ClientOption{dtls.WithMinVersion(protocol.Version1_3), dtls.WithMaxVersion(protocol.Version1_3),
		dtls.WithEllipticCurves(curves...), dtls.WithServerName(name), dtls.WithMTU(o.mtu)}
	if o.CAFile == "" {
		return append(opts, dtls.WithInsecureSkipVerify(true)), nil
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", o.CAFile)
	}
	return append(opts, dtls.WithRootCAs(pool)), nil
}

type client struct {
	o    *clientOptions
	opts []dtls.ClientOption
	addr *net.UDPAddr
}

func (c *client) runSample(s *sample) {
	var t [phCount]int64
	var out kit.Outcome
	s.Transport = "udp"
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t[phStart] = kit.MonoNs()
		out.Set("connect_error", "UDP socket: %v", err)
		s.Finish(phaseNames[:], t[:], &out)
		return
	}
	if p, ok := udp.LocalAddr().(*net.UDPAddr); ok && p.Port != 0 {
		port := p.Port
		s.LocalPort = &port
	}
	cc := &countingConn{PacketConn: udp}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	t[phStart] = kit.MonoNs()
	conn, err := dtls.Client(cc, c.addr, c.opts...)
	if err == nil {
		err = conn.HandshakeContext(ctx)
	}
	returned := kit.MonoNs()
	sent, received := cc.snapshot()
	// what crossed up to the handshake's end (an alert or ACK after it is not part of it)
	for len(sent) > 0 && sent[len(sent)-1].t > returned {
		sent = sent[:len(sent)-1]
	}
	d := &dtlsCounts{DatagramsSent: len(sent), DatagramsReceived: len(received), MTU: c.o.mtu,
		BytesSent: bytesBefore(sent, len(sent)), BytesReceived: bytesBefore(received, len(received))}
	d.ClientHellos, d.ClientHelloDatagrams = helloCounts(sent)
	s.DTLS = d
	hellos, _ := serverHellos(received)
	for _, h := range hellos {
		if h.retry {
			s.HRR, d.Cookie = true, d.Cookie || h.cookie
		} else if h.group != 0 {
			g := kit.GroupString(tls.CurveID(h.group))
			s.Group = &g
		}
	}
	if len(sent) > 0 {
		t[phClientHelloSent] = sent[0].t
	}
	if i := firstServerHello(received); i >= 0 {
		t[phServerHelloReceived] = received[i].t
	}
	if err == nil {
		last := len(sent) - 1
		t[phHandshakeDone] = sent[last].t
		s.WireMilestone = &kit.WireMilestone{Dir: "c2s", Offset: bytesBefore(sent, last), Edge: "first"}
		d.lastSize = sent[last].size
		if st, ok := conn.ConnectionState(); ok {
			if len(st.PeerCertificates) > 0 {
				if sa, ok := leafSigalg(st.PeerCertificates[0]); ok {
					n := kit.SigalgString(sa)
					s.Sigalg = &n
				}
			}
			cs := st.CipherSuiteID.String()
			s.Cipher = &cs
		}
		if s.Group == nil {
			out.Set("no_server_hello", "the handshake ended without a ServerHello read on the socket")
		}
	} else {
		cls, msg := classify(err)
		out.Set(cls, "%s", msg)
	}
	if conn != nil {
		_ = conn.Close() // its close_notify is not waited for
	}
	_ = udp.Close()
	s.phases = t
	s.Finish(phaseNames[:], t[:], &out)
}

func clientMain(args []string) int {
	o := parseClientOptions(args)
	opts, err := clientConfig(o)
	if err != nil {
		kit.Usage("--cafile", err.Error())
	}
	c := &client{o: o, opts: opts, addr: &net.UDPAddr{IP: net.ParseIP(o.Host), Port: o.Port}}
	return kit.RunSamples(&o.ClientOptions, func(i int) kit.Sample {
		s := &sample{SampleHead: kit.SampleHead{Worker: o.Worker, I: i, Mode: o.Mode}}
		c.runSample(s)
		return s
	})
}
