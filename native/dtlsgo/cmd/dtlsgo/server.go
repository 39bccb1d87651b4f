package main

// The server: pion/dtls's listener, one UDP port per site, DTLS 1.3 only with exactly the groups given.
// A site with cookie answers a ClientHello without one with a HelloRetryRequest carrying a cookie (RFC 9147
// §5.1: the stateless check that the client owns its address, pion's default); without, it goes on at once.
// Each connection's handshake runs in its own goroutine, so concurrent handshakes do not queue beyond the
// CPUs; once it is done the server waits for the client's close_notify (or the idle timeout).
//
// The configuration file (JSON; every path absolute):
//
//	{"addr": "10.0.0.2", "log": "/run/dir/dtlsgo-server.log",
//	 "groups": ["X25519MLKEM768", "x25519"],                 accepted groups (names as tlsgo's)
//	 "sites": [{"port": 4433, "chain": "chain.pem", "key": "leaf.key", "cookie": true, "mtu": 1200}]}

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pion/dtls/v4"
	"github.com/pion/dtls/v4/pkg/crypto/elliptic"
	"github.com/pion/dtls/v4/pkg/protocol"

	kit "pqbench/native/gotlskit"
)

const idleAfterHandshake = 10 * time.Second

type siteConfig struct {
	Port   int    `json:"port"`
	Chain  string `json:"chain"`
	Key    string `json:"key"`
	Cookie bool   `json:"cookie"`
	MTU    int    `json:"mtu"`
}

type serverConfig struct {
	Addr   string       `json:"addr"`
	Log    string       `json:"log"`
	Groups []string     `json:"groups"`
	Sites  []siteConfig `json:"sites"`
}

func readServerConfig(path string) *serverConfig {
	var c serverConfig
	kit.ReadConfig(path, &c, func() string { return c.Addr })
	if len(c.Sites) == 0 {
		kit.Usage("sites", "at least one site is required")
	}
	if _, err := kit.ParseGroups(strings.Join(c.Groups, ":")); err != nil {
		kit.Usage("groups", err.Error())
	}
	for i, s := range c.Sites {
		if s.Port < 1 || s.Port > 65535 {
			kit.Usage(fmt.Sprintf("sites[%d].port", i), "must be in 1..65535")
		}
		if s.Chain == "" || s.Key == "" {
			kit.Usage(fmt.Sprintf("sites[%d]", i), "chain and key are required")
		}
		if s.MTU != 0 && (s.MTU < 256 || s.MTU > 65507) {
			kit.Usage(fmt.Sprintf("sites[%d].mtu", i), "must be in 256..65507")
		}
	}
	return &c
}

func curvesOf(names []string) []elliptic.Curve {
	ids, _ := kit.ParseGroups(strings.Join(names, ":"))
	out := make([]elliptic.Curve, len(ids))
	for i, id := range ids {
		out[i] = elliptic.Curve(id)
	}
	return out
}

// serverOptions: DTLS 1.3 only, exactly these groups, the site's chain, its cookie choice and MTU.
func serverOptions(cert tls.Certificate, curves []elliptic.Curve, cookie bool, mtu int) []dtls.ServerOption {
	opts := []dtls.ServerOption{dtls.WithMinVersion(protocol.Version1_3), dtls.WithMaxVersion(protocol.Version1_3),
		dtls.WithCertificates(cert), dtls.WithEllipticCurves(curves...), dtls.WithInsecureSkipVerifyHello(!cookie)}
	if mtu != 0 {
		opts = append(opts, dtls.WithMTU(mtu))
	}
	return opts
}

// serve completes the handshake of each connection the listener accepts, then holds it until the client closes.
func serve(ln net.Listener, handshakes, failures *atomic.Int64, logger *log.Logger) {
	for {
		c, err := ln.Accept()
		if err != nil {
			logger.Printf("%s: accept: %v", ln.Addr(), err)
			return
		}
		go func(c net.Conn) {
			defer c.Close()
			dc := c.(*dtls.Conn)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := dc.HandshakeContext(ctx)
			cancel()
			if err != nil {
				failures.Add(1)
				return
			}
			handshakes.Add(1)
			_ = c.SetReadDeadline(time.Now().Add(idleAfterHandshake))
			buf := make([]byte, 2048)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}(c)
	}
}

func serverMain(args []string) int {
	o := kit.ParseOptions(args, "--config")
	cfg := readServerConfig(o.Required("--config"))
	logger := kit.OpenLog(cfg.Log)
	curves := curvesOf(cfg.Groups)
	var handshakes, failures atomic.Int64
	var listeners []net.Listener
	for i, st := range cfg.Sites {
		field := fmt.Sprintf("sites[%d]", i)
		cert, err := tls.LoadX509KeyPair(st.Chain, st.Key)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dtlsgo: %s: %v\n", field, err)
			return 3
		}
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(cfg.Addr), Port: st.Port})
		if err != nil {
			fmt.Fprintf(os.Stderr, "dtlsgo: %s: %v\n", field, err)
			return 3
		}
		ln, err := dtls.Listen(udp, serverOptions(cert, curves, st.Cookie, st.MTU)...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dtlsgo: %s: %v\n", field, err)
			return 3
		}
		listeners = append(listeners, ln)
		go serve(ln, &handshakes, &failures, logger)
		logger.Printf("listening on %s (%s), groups %s, cookie %v, mtu %d", udp.LocalAddr(), st.Chain,
			strings.Join(cfg.Groups, ":"), st.Cookie, st.MTU)
	}
	logger.Printf("%s, GOMAXPROCS %d, pid %d", runtime.Version(), runtime.GOMAXPROCS(0), os.Getpid())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, ln := range listeners {
		_ = ln.Close()
	}
	logger.Printf("stopping: %d handshakes completed, %d failed", handshakes.Load(), failures.Load())
	return 0
}
