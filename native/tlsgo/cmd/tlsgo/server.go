package main

// The server: crypto/tls behind net/http, TLS 1.3 only, exactly the groups given, one port per
// certificate chain, pages of random bytes by name, HTTP/1.1 keep-alive. A goroutine per connection
// (net/http's model), so concurrent handshakes do not queue behind each other beyond the CPUs.

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	kit "pqbench/native/gotlskit"
)

type site struct {
	port          int
	chain, keyPEM string
}

func parseSite(s string) site {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		kit.Usage("--site", fmt.Sprintf("%q is not PORT,CHAIN_PEM,KEY_PEM", s))
	}
	port, err := strconv.Atoi(parts[0])
	if err != nil || port < 1 || port > 65535 {
		kit.Usage("--site", fmt.Sprintf("%q: port must be in 1..65535", s))
	}
	return site{port, parts[1], parts[2]}
}

type counters struct{ handshakes, failures atomic.Int64 }

func serverMain(args []string) int {
	o := kit.ParseOptions(args, "--addr", "--site", "--groups", "--page", "--log")
	addr := o.Required("--addr")
	if ip := net.ParseIP(addr); ip == nil {
		kit.Usage("--addr", "must be an IP address")
	}
	groups, err := kit.ParseGroups(o.Required("--groups"))
	if err != nil {
		kit.Usage("--groups", err.Error())
	}
	if len(o["--site"]) == 0 {
		kit.Usage("--site", "required (at least one)")
	}
	logw := os.Stderr
	if p := o.Str("--log", ""); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			kit.Usage("--log", err.Error())
		}
		logw = f
	}
	logger := log.New(logw, "", log.LstdFlags|log.Lmicroseconds)
	pages := map[string]int{}
	for _, p := range o["--page"] {
		name, size, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(size)
		if !ok || err != nil || n < 0 || name == "" || strings.Contains(name, "/") {
			kit.Usage("--page", fmt.Sprintf("%q is not NAME=BYTES", p))
		}
		pages[name] = n
	}
	handler := kit.PageHandler(pages)
	var count counters
	var listeners []net.Listener
	for _, spec := range o["--site"] {
		st := parseSite(spec)
		cert, err := tls.LoadX509KeyPair(st.chain, st.keyPEM)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tlsgo: --site %s: %v\n", spec, err)
			return 3
		}
		cfg := &tls.Config{
			MinVersion:       tls.VersionTLS13,
			MaxVersion:       tls.VersionTLS13,
			CurvePreferences: groups, // accepted: exactly these
			Certificates:     []tls.Certificate{cert},
			VerifyConnection: func(tls.ConnectionState) error { count.handshakes.Add(1); return nil },
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(st.port)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "tlsgo: --site %s: %v\n", spec, err)
			return 3
		}
		listeners = append(listeners, ln)
		srv := &http.Server{
			Handler:      handler,
			TLSConfig:    cfg,
			TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1 only
			IdleTimeout:  120 * time.Second,
			ErrorLog:     logger,
			ConnState: func(c net.Conn, s http.ConnState) {
				if s == http.StateClosed || s == http.StateHijacked {
					if tc, ok := c.(*tls.Conn); ok && !tc.ConnectionState().HandshakeComplete {
						count.failures.Add(1)
					}
				}
			},
		}
		go func(ln net.Listener, srv *http.Server) {
			err := srv.Serve(tls.NewListener(ln, cfg))
			logger.Printf("port %s: %v", ln.Addr(), err)
		}(ln, srv)
		logger.Printf("listening on %s (%s), groups %s", ln.Addr(), st.chain, o.Str("--groups", ""))
	}
	logger.Printf("%s, GOMAXPROCS %d, pid %d", runtime.Version(), runtime.GOMAXPROCS(0), os.Getpid())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, ln := range listeners {
		_ = ln.Close()
	}
	logger.Printf("stopping: %d handshakes verified by the server's VerifyConnection, %d connections closed before the handshake completed",
		count.handshakes.Load(), count.failures.Load())
	return 0
}
