package main

// OpenSSH's own client, timed (--openssh PATH): per sample, sshtimer starts `ssh` with a ProxyCommand
// that runs `sshtimer --relay`. The relay takes the sample's zero (CLOCK_MONOTONIC_RAW) just before its
// TCP connect, so ssh's start-up (config, keys) before it asked for the connection is outside the
// timing; it copies bytes between ssh and the socket and traces them like the Go client (same phases,
// the negotiated algorithms from the two KEXINITs), and writes its part of the sample to a file.
// command_done is when ssh exited. userauth_done cannot be seen (encrypted) and stays null.
// The relay is one more hop per flight (a pipe each way, tens of microseconds): the sample says
// "client": "openssh-relay", and the wire record times the connection itself.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// relayResult is what the relay hands back to the parent.
type relayResult struct {
	StartMonoNs  int64             `json:"start_mono_ns"`
	TNs          map[string]*int64 `json:"t_ns"`
	LocalPort    *int              `json:"local_port"`
	Group        string            `json:"group"`
	Sigalg       string            `json:"sigalg"`
	ServerIdent  string            `json:"server_ident"`
	MsgBytesSent map[string]int    `json:"msg_bytes_sent"`
	MsgBytesRecv map[string]int    `json:"msg_bytes_received"`
	Milestone    *milestone        `json:"wire_milestone"`
	TCPHandshake *tcpCounts        `json:"tcp_handshake"`
	TCPEnd       *tcpCounts        `json:"tcp_end"`
	ErrorClass   string            `json:"error_class"`
	Error        string            `json:"error"`
}

// relay: sshtimer --relay --host H --port P --out FILE --timeout-ms T (run by ssh as its ProxyCommand).
func relay(host string, port, timeoutMs int, out string) {
	res := relayResult{TNs: map[string]*int64{}}
	// a process just started: resolve the address and bring up Go's poller before the zero, so the
	// time from the zero to the SYN is as short as in a warmed-up sshtimer
	addr, aerr := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	// The zero is taken in the dialer's Control hook, once the socket exists and just before its connect: in a
	// process just started, Go's first Dial spent 0.1-0.25 ms before the SYN left (beside a busy test suite), which
	// the client's time counted and the wire's did not (median client - wire 0.25 ms against 0.05 for sshtimer)
	t0 := time.Now()
	res.StartMonoNs = monoRaw()
	d := net.Dialer{Timeout: time.Duration(timeoutMs) * time.Millisecond,
		Control: func(string, string, syscall.RawConn) error {
			res.StartMonoNs = monoRaw()
			t0 = time.Now()
			return nil
		}}
	at := func(name string, t time.Time) {
		v := t.Sub(t0).Nanoseconds()
		res.TNs[name] = &v
	}
	// ssh sends its ProxyCommand SIGHUP when it is done, without waiting for it: finish the record.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	save := func() { // atomically: the parent polls for the file
		data, _ := json.Marshal(&res)
		if os.WriteFile(out+".tmp", data, 0o600) == nil {
			_ = os.Rename(out+".tmp", out)
		}
	}
	var conn net.Conn
	err := aerr
	if err == nil {
		conn, err = d.Dial("tcp", addr.String())
	}
	if err != nil {
		res.ErrorClass, res.Error = "connect_error", err.Error()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			res.ErrorClass = "connect_timeout"
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			res.ErrorClass = "connect_refused"
		}
		save()
		os.Exit(1)
	}
	at("tcp_connected", time.Now())
	tcp := conn.(*net.TCPConn)
	lp := tcp.LocalAddr().(*net.TCPAddr).Port
	res.LocalPort = &lp
	tr := newTracer(conn)
	done := make(chan struct{}, 2)
	go func() { // ssh -> server
		_, _ = io.Copy(writerOnly{tr}, os.Stdin)
		_ = tcp.CloseWrite()
		done <- struct{}{}
	}()
	go func() { // server -> ssh
		_, _ = io.Copy(os.Stdout, readerOnly{tr})
		_ = os.Stdout.Close()
		done <- struct{}{}
	}()
	<-done
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	res.TCPEnd = readTCPInfo(tcp)
	tr.mu.Lock()
	res.Milestone = tr.record(res.TNs, at)
	res.Group, res.Sigalg = tr.negotiated()
	res.MsgBytesSent, res.MsgBytesRecv = tr.sent.Sizes, tr.recv.Sizes
	res.TCPHandshake = tr.tcpAtNewkeys
	tr.mu.Unlock()
	save()
	_ = conn.Close()
}

type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(b []byte) (int, error) { return w.w.Write(b) }

type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(b []byte) (int, error) { return r.r.Read(b) }

// reapRelay waits for the sample's relay, reparented to us when ssh exited: once its record is written it only
// closes its socket (when it wrote none, it ends within its own timeouts). ssh itself was waited for, so every
// child left is a relay.
func reapRelay() {
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil && !errors.Is(err, syscall.EINTR) {
			return // ECHILD: none left
		}
	}
}

// opensshClient times one sample with OpenSSH's ssh through the relay.
type opensshClient struct {
	o         options
	ssh       string
	self      string
	dir       string
	knownHost string
}

func newOpensshClient(o options, ssh string, hostKeyLine string) *opensshClient {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshtimer: %v\n", err)
		os.Exit(3)
	}
	dir, err := os.MkdirTemp("", "sshtimer-openssh-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshtimer: %v\n", err)
		os.Exit(3)
	}
	// ssh does not wait for its ProxyCommand: the relay finishes its record after ssh has exited. As the
	// subreaper of what we start, we get the orphaned relay instead of init, so it stays in our process tree
	// (whoever owns us can find and end it) and run() reaps it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "sshtimer: prctl(PR_SET_CHILD_SUBREAPER): %v\n", err)
		os.Exit(3)
	}
	kh := filepath.Join(dir, "known_hosts")
	line := fmt.Sprintf("[%s]:%d %s\n", o.host, o.port, hostKeyLine)
	if certHost(o) { // the CA, for host certificates naming the server --principal (ssh -o HostKeyAlias)
		line = fmt.Sprintf("@cert-authority %s %s\n", o.principal, hostKeyLine)
	}
	if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "sshtimer: %v\n", err)
		os.Exit(3)
	}
	return &opensshClient{o: o, ssh: ssh, self: self, dir: dir, knownHost: kh}
}

func (c *opensshClient) run(i int) (s sample) {
	s = sample{Worker: c.o.worker, I: i, Mode: c.o.mode, TNs: map[string]*int64{}}
	for _, p := range phaseNames {
		s.TNs[p] = nil
	}
	out := filepath.Join(c.dir, fmt.Sprintf("relay-%d.json", i))
	_ = os.Remove(out)
	proxy := fmt.Sprintf("%s --relay --host %s --port %d --timeout-ms %d --out %s", c.self, c.o.host, c.o.port,
		c.o.timeoutMs, out)
	alg, _ := splitHostKey(c.o.hostkey)
	args := []string{"-F", "none", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + c.knownHost, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "KexAlgorithms=" + c.o.kex, "-o", "HostKeyAlgorithms=" + alg, "-o", "IdentitiesOnly=yes",
		"-o", "ProxyCommand=" + proxy, "-o", "LogLevel=ERROR", "-i", c.o.identity}
	if certHost(c.o) { // ssh checks the certificate's principals against this name, not the address
		args = append(args, "-o", "HostKeyAlias="+c.o.principal)
	}
	args = append(args, "-p", strconv.Itoa(c.o.port), "-l", c.o.user, c.o.host, c.o.command)
	cmd := exec.Command(c.ssh, args...)
	// a file, not a pipe: Wait then returns when ssh exits, not when the relay (which inherits
	// ssh's stderr) closes it
	errFile, ferr := os.CreateTemp(c.dir, "stderr-")
	if ferr != nil {
		msg, class := ferr.Error(), "client_error"
		s.ErrorClass, s.Error = &class, &msg
		return s
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()
	cmd.Stderr = errFile
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		msg := err.Error()
		class := "client_error"
		s.ErrorClass, s.Error = &class, &msg
		return s
	}
	timer := time.AfterFunc(time.Duration(c.o.timeoutMs)*time.Millisecond+2*time.Second, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	end := monoRaw()
	var r relayResult
	var data []byte
	var rerr error
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if data, rerr = os.ReadFile(out); rerr == nil || time.Now().After(wait) {
			break
		}
	}
	if rerr == nil {
		rerr = json.Unmarshal(data, &r)
	}
	_ = os.Remove(out)
	reapRelay()
	errText, _ := os.ReadFile(errFile.Name())
	fail := func(class, msg string) {
		s.ErrorClass, s.Error = &class, &msg
	}
	if rerr != nil {
		fail("client_error", "the relay left no record: "+strings.TrimSpace(string(errText)))
		return s
	}
	s.StartMonoNs, s.LocalPort = r.StartMonoNs, r.LocalPort
	for k, v := range r.TNs {
		s.TNs[k] = v
	}
	s.MsgBytesSent, s.MsgBytesRecv, s.WireMilestone = r.MsgBytesSent, r.MsgBytesRecv, r.Milestone
	s.TCPHandshake, s.TCPEnd = r.TCPHandshake, r.TCPEnd
	if r.Group != "" {
		s.Group = &r.Group
	}
	if r.Sigalg != "" {
		s.Sigalg = &r.Sigalg
	}
	var ee *exec.ExitError
	switch {
	case r.ErrorClass != "":
		fail(r.ErrorClass, r.Error)
	case errors.As(err, &ee) && ee.ExitCode() == 255:
		msg := strings.TrimSpace(string(errText))
		class := "ssh_error"
		switch {
		case strings.Contains(msg, "Host key verification failed"), strings.Contains(msg, "HOST IDENTIFICATION"),
			// a host certificate ssh refused falls back to its bare key, which HostKeyAlgorithms excludes
			strings.Contains(msg, "not permitted by HostkeyAlgorithms"):
			class = "host_key"
		case strings.Contains(msg, "Permission denied"):
			class = "auth"
		case strings.Contains(msg, "no matching"):
			class = "negotiation"
		case strings.Contains(msg, "timed out"), time.Duration(end-r.StartMonoNs) > time.Duration(c.o.timeoutMs)*time.Millisecond:
			class = "timeout"
		}
		fail(class, "ssh: "+msg)
	case errors.As(err, &ee):
		st := ee.ExitCode()
		s.ExitStatus = &st
		fail("command", fmt.Sprintf("%q exited with %d", c.o.command, st))
	case err != nil:
		fail("client_error", err.Error())
	default:
		zero := 0
		s.ExitStatus = &zero
		v := end - r.StartMonoNs
		s.TNs["command_done"] = &v
	}
	s.OK = s.ErrorClass == nil
	return s
}
