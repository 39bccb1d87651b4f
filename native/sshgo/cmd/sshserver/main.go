// sshserver: pqbench's Go SSH server (golang.org/x/crypto/ssh), for the host keys OpenSSH does not
// have (ssh-mldsa-44/65/87) and as a second server beside OpenSSH's sshd.
//
//	sshserver --listen ADDR:PORT [--listen ...] --hostkey FILE --hostkey-alg NAME --kex K1,K2
//	          --authorized-key PUBFILE [--host-cert CERTFILE] [--log FILE]
//	sshserver keygen --type NAME --out FILE     a private key (0600) and FILE.pub
//	sshserver hostcert --ca CAKEY --key HOST.pub --principal NAME --total-bytes N [--key-id TEXT] --out FILE
//	                                           a host certificate padded to N bytes (size-only host keys)
//	sshserver --capabilities                   what this build implements (JSON)
//
// It accepts only the key exchanges of --kex and offers only the host key algorithm of --hostkey-alg;
// with --host-cert (a certificate of the host key, --hostkey-alg its certificate algorithm) the server
// presents the certificate instead of the bare key. A client authenticates with the one public key of
// --authorized-key (any user name). On a session
// channel, "exec" (any command) and "shell" succeed at once with exit status 0 and the channel closes:
// the command costs nothing, so a client's time is the protocol's. One log line per connection:
//
//	conn remote=ADDR:PORT kex=NAME hostkey=NAME cipher=NAME user=U ok|error=...
//
// Exit: 2 bad options, 3 setup impossible (a key cannot be read, a port cannot be bound).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"

	"pqbench/native/sshgo/internal/sshkeys"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func usage(field, why string) {
	fmt.Fprintf(os.Stderr, "sshserver: %s: %s\n", field, why)
	os.Exit(2)
}

func keygen(args []string) {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	typ := fs.String("type", "", "")
	out := fs.String("out", "", "")
	if err := fs.Parse(args); err != nil {
		usage("keygen", err.Error())
	}
	if *typ == "" || *out == "" {
		usage("keygen", "--type and --out are required")
	}
	key, err := sshkeys.Generate(*typ)
	if err != nil {
		usage("--type", err.Error())
	}
	if err := sshkeys.Write(key, *out); err != nil {
		fmt.Fprintf(os.Stderr, "sshserver: keygen: %v\n", err)
		os.Exit(3)
	}
}

// hostcert writes the host certificate of a size-only host key (sshkeys.PaddedHostCert): key id TEXT
// then padding, so that the certificate and the ed25519 signature the server sends are N bytes.
func hostcert(args []string) {
	fs := flag.NewFlagSet("hostcert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	caFile := fs.String("ca", "", "")
	keyFile := fs.String("key", "", "")
	principal := fs.String("principal", "", "")
	total := fs.Int("total-bytes", 0, "")
	keyID := fs.String("key-id", "pqbench size-only host key", "")
	out := fs.String("out", "", "")
	if err := fs.Parse(args); err != nil {
		usage("hostcert", err.Error())
	}
	if *caFile == "" || *keyFile == "" || *principal == "" || *out == "" || *total <= 0 {
		usage("hostcert", "--ca, --key, --principal, --total-bytes (> 0) and --out are required")
	}
	ca, err := sshkeys.Load(*caFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshserver: hostcert: --ca: %v\n", err)
		os.Exit(3)
	}
	hostKey, err := sshkeys.LoadPublic(*keyFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshserver: hostcert: --key: %v\n", err)
		os.Exit(3)
	}
	cert, err := sshkeys.PaddedHostCert(ca, hostKey, *principal, *keyID, *total)
	if errors.Is(err, sshkeys.ErrTooSmall) {
		usage("--total-bytes", err.Error())
	} else if err != nil {
		usage("--key", err.Error())
	}
	if err := os.WriteFile(*out, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "sshserver: hostcert: --out: %v\n", err)
		os.Exit(3)
	}
}

// hostSigner is the server's host key: the key restricted to its algorithm, or its certificate.
func hostSigner(keyFile, alg, certFile string) (ssh.Signer, error) {
	key, err := sshkeys.Load(keyFile)
	if err != nil {
		return nil, err
	}
	if certFile == "" {
		return sshkeys.HostSigner(key, alg)
	}
	cert, err := sshkeys.LoadHostCert(certFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewCertSigner(cert, key)
	if err == nil && cert.Type() != alg {
		err = fmt.Errorf("the certificate is %s, not --hostkey-alg %s", cert.Type(), alg)
	}
	return signer, err
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "keygen" {
		keygen(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "hostcert" {
		hostcert(os.Args[2:])
		return
	}
	var listen listFlag
	fs := flag.NewFlagSet("sshserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	caps := fs.Bool("capabilities", false, "")
	fs.Var(&listen, "listen", "")
	hostkeyFile := fs.String("hostkey", "", "")
	hostkeyAlg := fs.String("hostkey-alg", "", "")
	kex := fs.String("kex", "", "")
	authorized := fs.String("authorized-key", "", "")
	hostCert := fs.String("host-cert", "", "")
	logFile := fs.String("log", "", "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		usage("options", err.Error())
	}
	if *caps {
		json.NewEncoder(os.Stdout).Encode(sshkeys.Capabilities("server"))
		return
	}
	switch {
	case len(listen) == 0:
		usage("--listen", "required (ADDR:PORT)")
	case *hostkeyFile == "" || *hostkeyAlg == "":
		usage("--hostkey/--hostkey-alg", "required")
	case *kex == "":
		usage("--kex", "required")
	case *authorized == "":
		usage("--authorized-key", "required")
	}
	kexes := strings.Split(*kex, ",")
	for _, k := range kexes {
		if err := sshkeys.Supported(k, ""); err != nil {
			usage("--kex", err.Error())
		}
	}
	if err := sshkeys.Supported("", *hostkeyAlg); err != nil {
		usage("--hostkey-alg", err.Error())
	}
	if (*hostCert != "") != sshkeys.IsCert(*hostkeyAlg) {
		usage("--host-cert", "goes with a certificate --hostkey-alg ("+sshkeys.CertAlg+"), and only with one")
	}
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sshserver: --log: %v\n", err)
			os.Exit(3)
		}
		log.SetOutput(f)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	key, err := hostSigner(*hostkeyFile, *hostkeyAlg, *hostCert)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshserver: --hostkey/--host-cert: %v\n", err)
		os.Exit(3)
	}
	userKey, err := sshkeys.LoadPublic(*authorized)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshserver: --authorized-key: %v\n", err)
		os.Exit(3)
	}
	want := string(userKey.Marshal())
	cfg := &ssh.ServerConfig{
		Config:        ssh.Config{KeyExchanges: kexes},
		ServerVersion: "SSH-2.0-pqbench_sshserver",
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == want {
				return &ssh.Permissions{}, nil
			}
			return nil, fmt.Errorf("unknown public key")
		},
	}
	cfg.AddHostKey(key)
	var lns []net.Listener
	for _, addr := range listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sshserver: --listen %s: %v\n", addr, err)
			os.Exit(3)
		}
		lns = append(lns, ln)
		log.Printf("listening on %s kex=%s hostkey=%s", addr, *kex, *hostkeyAlg)
	}
	for _, ln := range lns {
		go serve(ln, cfg)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	for _, ln := range lns {
		ln.Close()
	}
}

func serve(ln net.Listener, cfg *ssh.ServerConfig) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		go handle(c, cfg)
	}
}

func handle(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		log.Printf("conn remote=%s error=%q", c.RemoteAddr(), err.Error())
		return
	}
	var a ssh.NegotiatedAlgorithms
	if am, ok := sc.Conn.(ssh.AlgorithmsConnMetadata); ok {
		a = am.Algorithms()
	}
	log.Printf("conn remote=%s kex=%s hostkey=%s cipher=%s user=%s ok", c.RemoteAddr(), a.KeyExchange,
		a.HostKey, a.Write.Cipher, sc.User())
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go session(ch, creqs)
	}
}

// session answers exec/shell with exit status 0 and closes the channel; other requests are refused.
func session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	for req := range reqs {
		switch req.Type {
		case "exec", "shell":
			req.Reply(true, nil)
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
			ch.CloseWrite()
			ch.Close()
			return
		default:
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}
}
