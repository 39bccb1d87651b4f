package main

// The server: quic-go's HTTP/3 server, one UDP port (and quic.Transport) per site, TLS 1.3 only with
// exactly the groups given, pages of random bytes by name. A site with retry validates every client's
// address with a Retry first (quic.Transport.VerifySourceAddress); without, it never does. quic-go runs
// each connection in goroutines of its own, so concurrent handshakes do not queue beyond the CPUs.
//
// The configuration file (JSON; every path absolute):
//
//	{"addr": "10.0.0.2", "log": "/run/dir/quicgo-server.log",
//	 "groups": ["X25519MLKEM768", "x25519"],              accepted groups (names as tlsgo's)
//	 "pages": {"1k": 1000},                               GET /NAME returns BYTES random bytes
//	 "sites": [{"port": 4433, "chain": "chain.pem", "key": "leaf.key", "retry": false,
//	            "groups": ["x25519"]}]}                   per site: groups optional (default: the file's)

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	kit "pqbench/native/gotlskit"
)

type siteConfig struct {
	Port   int      `json:"port"`
	Chain  string   `json:"chain"`
	Key    string   `json:"key"`
	Retry  bool     `json:"retry"`
	Groups []string `json:"groups"`
}

type serverConfig struct {
	Addr   string         `json:"addr"`
	Log    string         `json:"log"`
	Groups []string       `json:"groups"`
	Pages  map[string]int `json:"pages"`
	Sites  []siteConfig   `json:"sites"`
}

// readServerConfig reads and checks the file; a bad field exits 2 naming it.
func readServerConfig(path string) *serverConfig {
	var c serverConfig
	kit.ReadConfig(path, &c, func() string { return c.Addr })
	if len(c.Sites) == 0 {
		kit.Usage("sites", "at least one site is required")
	}
	if _, err := kit.ParseGroups(strings.Join(c.Groups, ":")); err != nil {
		kit.Usage("groups", err.Error())
	}
	for name, n := range c.Pages {
		if name == "" || strings.Contains(name, "/") || n < 0 {
			kit.Usage("pages", fmt.Sprintf("%q=%d is not NAME=BYTES", name, n))
		}
	}
	for i, s := range c.Sites {
		if s.Port < 1 || s.Port > 65535 {
			kit.Usage(fmt.Sprintf("sites[%d].port", i), "must be in 1..65535")
		}
		if s.Chain == "" || s.Key == "" {
			kit.Usage(fmt.Sprintf("sites[%d]", i), "chain and key are required")
		}
		if len(s.Groups) > 0 {
			if _, err := kit.ParseGroups(strings.Join(s.Groups, ":")); err != nil {
				kit.Usage(fmt.Sprintf("sites[%d].groups", i), err.Error())
			}
		}
	}
	return &c
}

type counters struct{ handshakes, retries atomic.Int64 }

func serverMain(args []string) int {
	o := kit.ParseOptions(args, "--config")
	cfg := readServerConfig(o.Required("--config"))
	logger := kit.OpenLog(cfg.Log)
	handler := kit.PageHandler(cfg.Pages)
	var count counters
	var closers []func()
	for i, st := range cfg.Sites {
		field := fmt.Sprintf("sites[%d]", i)
		names := st.Groups
		if len(names) == 0 {
			names = cfg.Groups
		}
		groups, _ := kit.ParseGroups(strings.Join(names, ":"))
		cert, err := tls.LoadX509KeyPair(st.Chain, st.Key)
		if err != nil {
			fmt.Fprintf(os.Stderr, "quicgo: %s: %v\n", field, err)
			return 3
		}
		tlsCfg := http3.ConfigureTLSConfig(&tls.Config{
			MinVersion:       tls.VersionTLS13,
			MaxVersion:       tls.VersionTLS13,
			CurvePreferences: groups, // accepted: exactly these
			Certificates:     []tls.Certificate{cert},
			VerifyConnection: func(tls.ConnectionState) error { count.handshakes.Add(1); return nil },
		})
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(cfg.Addr), Port: st.Port})
		if err != nil {
			fmt.Fprintf(os.Stderr, "quicgo: %s: %v\n", field, err)
			return 3
		}
		retry := st.Retry
		tr := &quic.Transport{Conn: udp, VerifySourceAddress: func(net.Addr) bool {
			if retry {
				count.retries.Add(1)
			}
			return retry
		}}
		ln, err := tr.Listen(tlsCfg, &quic.Config{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "quicgo: %s: %v\n", field, err)
			return 3
		}
		srv := &http3.Server{Handler: handler}
		closers = append(closers, func() { _ = srv.Close(); _ = ln.Close(); _ = tr.Close() })
		go func(port int) {
			err := srv.ServeListener(ln)
			logger.Printf("port %d: %v", port, err)
		}(st.Port)
		logger.Printf("listening on %s (%s), groups %s, retry %v", udp.LocalAddr(), st.Chain,
			strings.Join(names, ":"), retry)
	}
	logger.Printf("%s, GOMAXPROCS %d, pid %d, QUIC_GO_DISABLE_GSO=%s", runtime.Version(), runtime.GOMAXPROCS(0),
		os.Getpid(), os.Getenv("QUIC_GO_DISABLE_GSO"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, c := range closers {
		c()
	}
	logger.Printf("stopping: %d handshakes verified by the server's VerifyConnection, %d Retry decisions",
		count.handshakes.Load(), count.retries.Load())
	return 0
}
