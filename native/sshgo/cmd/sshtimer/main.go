// sshtimer: an SSH timing client (golang.org/x/crypto/ssh). Each sample takes a CLOCK_MONOTONIC_RAW
// timestamp just before the TCP connect, then connects, runs the key exchange with the one key
// exchange and host key algorithm asked for, authenticates with a public key, runs one command on a
// session channel and closes; one JSON object per sample on stdout (pqtimer's shape, see
// native/pqtimer/pqtimer.c). Process start-up is outside every timing.
//
//	sshtimer --host ADDR --port N --kex NAME --hostkey NAME --user U --identity KEYFILE
//	         --known-host-key PUBFILE [--command true] [--count N] [--warmup N] [--timeout-ms T]
//	         [--worker K] [--claim FILE] [--mode handshake] [--principal pqbench] [--pause-ms MS]
//	sshtimer --kex-only --host ADDR --port N --kex NAME [--hostkey NAME] [--known-host-key PUBFILE] ...
//	                             a server pqbench did not start: the sample ends at NEWKEYS both ways; the
//	                             authentication after it (no method offered) is refused and not counted; the
//	                             host key is verified when PUBFILE is given, else recorded (host_key_fingerprint)
//	sshtimer --capabilities      what this build implements (JSON)
//	sshtimer --openssh PATH ...  the same samples from OpenSSH's ssh at PATH (see openssh.go)
//
// The phases come from a net.Conn wrapper that reads the unencrypted start of the SSH stream in
// both directions (identification lines, then binary packets up to NEWKEYS; see trace.go):
//
//	tcp_connected, server_ident_received, kexinit_exchanged (both KEXINITs sent/received),
//	kex_reply_received (the server's last key exchange message), newkeys_sent (the client's NEWKEYS:
//	the key exchange is done and the host key verified; also reported as handshake_done),
//	newkeys_received, userauth_done, command_done.
//
// --claim FILE: a 64-bit counter (native byte order) shared by the workers of a cell; each sample
// claims the next index and the worker stops once it reaches --count.
//
// A host key name whose algorithm is a certificate (sizeonly-<signature>: ssh-ed25519-cert-v01@openssh.com)
// makes --known-host-key the CA: the server's host certificate must be signed by it and valid for
// --principal (the name the certificate gives the server, not the address connected to).
//
// Exit: 0 every sample succeeded, 1 some failed, 2 bad options, 3 setup impossible.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"pqbench/native/sshgo/internal/sshkeys"
	"pqbench/native/sshgo/internal/sshwire"
)

type options struct {
	host, kex, hostkey, user, identity, knownHostKey, command, claim, mode string
	principal                                                              string
	port, count, warmup, timeoutMs, worker, pauseMs                        int
	openssh, out                                                           string
	relay, kexOnly                                                         bool
}

func usage(field, why string) {
	fmt.Fprintf(os.Stderr, "sshtimer: %s: %s\n", field, why)
	os.Exit(2)
}

func parseOptions() options {
	var o options
	fs := flag.NewFlagSet("sshtimer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	caps := fs.Bool("capabilities", false, "")
	fs.StringVar(&o.host, "host", "", "")
	fs.IntVar(&o.port, "port", 0, "")
	fs.StringVar(&o.kex, "kex", "", "")
	fs.StringVar(&o.hostkey, "hostkey", "", "")
	fs.StringVar(&o.user, "user", "root", "")
	fs.StringVar(&o.identity, "identity", "", "")
	fs.StringVar(&o.knownHostKey, "known-host-key", "", "")
	fs.StringVar(&o.principal, "principal", "pqbench", "")
	fs.StringVar(&o.command, "command", "true", "")
	fs.StringVar(&o.mode, "mode", "handshake", "")
	fs.IntVar(&o.count, "count", 1, "")
	fs.IntVar(&o.warmup, "warmup", 0, "")
	fs.IntVar(&o.pauseMs, "pause-ms", 0, "")
	fs.BoolVar(&o.kexOnly, "kex-only", false, "")
	fs.IntVar(&o.timeoutMs, "timeout-ms", 10000, "")
	fs.IntVar(&o.worker, "worker", 0, "")
	fs.StringVar(&o.claim, "claim", "", "")
	fs.StringVar(&o.openssh, "openssh", "", "")
	fs.BoolVar(&o.relay, "relay", false, "")
	fs.StringVar(&o.out, "out", "", "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		usage("options", err.Error())
	}
	if o.relay {
		if o.host == "" || o.port < 1 || o.port > 65535 || o.out == "" {
			usage("--relay", "needs --host, --port and --out")
		}
		relay(o.host, o.port, o.timeoutMs, o.out)
		os.Exit(0)
	}
	if *caps {
		json.NewEncoder(os.Stdout).Encode(sshkeys.Capabilities("client"))
		os.Exit(0)
	}
	switch {
	case o.host == "":
		usage("--host", "required")
	case o.port < 1 || o.port > 65535:
		usage("--port", "must be 1..65535")
	case o.kex == "":
		usage("--kex", "required")
	case o.kexOnly && o.openssh != "":
		usage("--kex-only", "only with sshtimer's own client (not --openssh)")
	case o.hostkey == "" && !o.kexOnly:
		usage("--hostkey", "required")
	case o.identity == "" && !o.kexOnly:
		usage("--identity", "required")
	case o.knownHostKey == "" && !o.kexOnly:
		usage("--known-host-key", "required")
	case o.mode != "handshake":
		usage("--mode", "only handshake (connect, key exchange, authentication, one command)")
	case o.count < 0, o.warmup < 0, o.pauseMs < 0:
		usage("--count/--warmup/--pause-ms", "must be >= 0")
	case o.timeoutMs < 1:
		usage("--timeout-ms", "must be >= 1")
	}
	if o.kexOnly && o.hostkey == "" {
		return o // a target's host key algorithm is the server's choice among the library's defaults
	}
	if o.openssh == "" {
		if err := sshkeys.Supported(o.kex, o.hostkey); err != nil {
			usage("--kex/--hostkey", err.Error())
		}
	} else if _, _, err := sshkeys.Split(o.hostkey); err != nil {
		usage("--hostkey", err.Error())
	}
	return o
}

// mapClaims maps the shared sample counter of --claim.
func mapClaims(path string) *uint64 {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		usage("--claim", err.Error())
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() < 8 {
		usage("--claim", "the file must hold a 64-bit counter (8 bytes)")
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		usage("--claim", err.Error())
	}
	return (*uint64)(unsafe.Pointer(&mem[0]))
}

func monoRaw() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts)
	return ts.Nano()
}

type tcpCounts struct {
	BytesSent     uint64 `json:"bytes_sent"`
	BytesReceived uint64 `json:"bytes_received"`
	SegsOut       uint32 `json:"segs_out"`
	SegsIn        uint32 `json:"segs_in"`
	Retransmits   uint32 `json:"retransmits"`
	RttUs         uint32 `json:"rtt_us"`
	Cwnd          uint32 `json:"cwnd"`
}

func readTCPInfo(c *net.TCPConn) *tcpCounts {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var out *tcpCounts
	_ = raw.Control(func(fd uintptr) {
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		out = &tcpCounts{BytesSent: ti.Bytes_sent, BytesReceived: ti.Bytes_received, SegsOut: ti.Segs_out,
			SegsIn: ti.Segs_in, Retransmits: ti.Total_retrans, RttUs: ti.Rtt, Cwnd: ti.Snd_cwnd}
	})
	return out
}

// sample is one printed JSON line.
type sample struct {
	Worker        int               `json:"worker"`
	I             int               `json:"i"`
	Mode          string            `json:"mode"`
	Client        string            `json:"client"`
	OK            bool              `json:"ok"`
	ErrorClass    *string           `json:"error_class"`
	Error         *string           `json:"error"`
	TNs           map[string]*int64 `json:"t_ns"`
	StartMonoNs   int64             `json:"start_mono_ns"`
	LocalPort     *int              `json:"local_port"`
	Group         *string           `json:"group"`
	Sigalg        *string           `json:"sigalg"`
	ServerVersion *string           `json:"server_version"`
	Cipher        *string           `json:"cipher"`
	MsgBytesSent  map[string]int    `json:"msg_bytes_sent"`
	MsgBytesRecv  map[string]int    `json:"msg_bytes_received"`
	WireMilestone *milestone        `json:"wire_milestone"`
	TCPHandshake  *tcpCounts        `json:"tcp_handshake"`
	TCPEnd        *tcpCounts        `json:"tcp_end"`
	ExitStatus    *int              `json:"exit_status"`
	// --kex-only: the server's host key as OpenSSH prints it (SHA256:...), verified or only recorded
	HostKeyFingerprint *string `json:"host_key_fingerprint,omitempty"`
	// sshtimer's own wait for a CPU during the sample (its threads' schedstat); with OpenSSH's ssh
	// it is the relay's, which takes the timestamps, not the ssh process's
	CPUWaitNs *int64 `json:"cpu_wait_ns"`
}

// milestone: where handshake_done lies on the wire, as the client saw the flights (see trace.go).
// Index is the client flight as the client counted it (a server flight arriving within microseconds
// of a client write can make it one off); Offset, the client's payload bytes before its NEWKEYS, is
// exact: the wire flight whose byte range starts there is the one.
type milestone struct {
	Dir    string `json:"dir"`
	Index  int    `json:"index"`
	Edge   string `json:"edge"`
	Offset int    `json:"offset"`
}

// phases, in order; handshake_done repeats newkeys_sent for the common metric.
var phaseNames = []string{"tcp_connected", "server_ident_received", "kexinit_exchanged", "kex_reply_received",
	"newkeys_sent", "newkeys_received", "handshake_done", "userauth_done", "command_done"}

type failure struct{ class, msg string }

func (f *failure) Error() string { return f.msg }

func fail(class string, err error) *failure { return &failure{class, err.Error()} }

// classify names an error of the SSH layer (internal/sshwire: the classes sshload counts too).
func classify(err error, during string) *failure {
	class, msg := sshwire.Classify(err, during)
	return &failure{class, msg}
}

type client struct {
	o         options
	signer    ssh.Signer
	checkHost ssh.HostKeyCallback
	kexAlg    string
}

func (c *client) run(i int) (s sample) {
	s = sample{Worker: c.o.worker, I: i, Mode: c.o.mode, TNs: map[string]*int64{}}
	for _, p := range phaseNames {
		s.TNs[p] = nil
	}
	timeout := time.Duration(c.o.timeoutMs) * time.Millisecond
	addr := net.JoinHostPort(c.o.host, strconv.Itoa(c.o.port))
	s.StartMonoNs = monoRaw()
	t0 := time.Now() // Go's monotonic clock for the phases; their zero is start_mono_ns
	at := func(name string, t time.Time) {
		v := t.Sub(t0).Nanoseconds()
		s.TNs[name] = &v
	}
	var tr *tracer
	var tcp *net.TCPConn
	err := func() *failure {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			class, msg := sshwire.ClassifyDial(err)
			return &failure{class, msg}
		}
		at("tcp_connected", time.Now())
		tcp = conn.(*net.TCPConn)
		port := tcp.LocalAddr().(*net.TCPAddr).Port
		s.LocalPort = &port
		_ = conn.SetDeadline(t0.Add(timeout))
		tr = newTracer(conn)
		var hostKeyType string
		cfg := &ssh.ClientConfig{
			Config: ssh.Config{KeyExchanges: []string{c.kexAlg}},
			User:   c.o.user,
			HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
				hostKeyType = key.Type()
				fp := ssh.FingerprintSHA256(key)
				s.HostKeyFingerprint = &fp
				if c.checkHost == nil {
					return nil // --kex-only without a known key: recorded, not verified
				}
				return c.checkHost("", nil, key)
			},
			BannerCallback: func(string) error { return nil },
			ClientVersion:  "SSH-2.0-pqbench_sshtimer",
		}
		if c.signer != nil {
			cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(c.signer)}
		}
		if c.o.hostkey != "" {
			cfg.HostKeyAlgorithms = []string{c.hostKeyAlg()}
		}
		sc, chans, reqs, err := ssh.NewClientConn(tr, addr, cfg)
		if err != nil && c.o.kexOnly && tr.keysExchanged() {
			// a server we have no account on: the key exchange is what is measured, and it completed
			// (NEWKEYS both ways); the authentication that followed was refused, as expected
			kex, hostkey := tr.negotiated()
			s.Group, s.Sigalg = &kex, &hostkey
			if hostKeyType != "" {
				s.Sigalg = &hostKeyType
			}
			return nil
		}
		if err != nil {
			return classify(err, tr.stage())
		}
		if c.o.kexOnly { // a server that let us in without a method: still only the key exchange counts
			kex, hostkey := tr.negotiated()
			s.Group, s.Sigalg = &kex, &hostkey
			_ = sc.Close()
			return nil
		}
		at("userauth_done", time.Now())
		cl := ssh.NewClient(sc, chans, reqs)
		defer cl.Close()
		if am, ok := sc.(ssh.AlgorithmsConnMetadata); ok {
			a := am.Algorithms()
			s.Group, s.Sigalg = &a.KeyExchange, &a.HostKey
			cipher := a.Write.Cipher
			s.Cipher = &cipher
		}
		if hostKeyType != "" && s.Sigalg == nil {
			s.Sigalg = &hostKeyType
		}
		sv := string(sc.ServerVersion())
		s.ServerVersion = &sv
		sess, err := cl.NewSession()
		if err != nil {
			return classify(err, "opening a session channel")
		}
		defer sess.Close()
		err = sess.Run(c.o.command)
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			st := ee.ExitStatus()
			s.ExitStatus = &st
			return &failure{"command", fmt.Sprintf("%q exited with %d", c.o.command, st)}
		}
		if err != nil {
			return classify(err, "running "+strconv.Quote(c.o.command))
		}
		zero := 0
		s.ExitStatus = &zero
		at("command_done", time.Now())
		s.TCPEnd = readTCPInfo(tcp)
		return nil
	}()
	if tr != nil {
		tr.mu.Lock()
		s.WireMilestone = tr.record(s.TNs, at)
		s.MsgBytesSent, s.MsgBytesRecv = tr.sent.Sizes, tr.recv.Sizes
		s.TCPHandshake = tr.tcpAtNewkeys
		tr.mu.Unlock()
		_ = tr.Close()
	}
	if err != nil {
		s.ErrorClass, s.Error = &err.class, &err.msg
		if tcp != nil && s.TCPEnd == nil {
			s.TCPEnd = readTCPInfo(tcp)
		}
	}
	s.OK = err == nil
	return s
}

func splitHostKey(name string) (string, int) {
	alg, bits, _ := sshkeys.Split(name)
	return alg, bits
}

func (c *client) hostKeyAlg() string {
	alg, _, _ := sshkeys.Split(c.o.hostkey)
	return alg
}

// certHost: the host key is a certificate and --known-host-key its CA.
func certHost(o options) bool {
	alg, _ := splitHostKey(o.hostkey)
	return sshkeys.IsCert(alg)
}

// hostKeyCheck: the one known host key, or a certificate signed by the known CA for --principal.
func hostKeyCheck(o options, known ssh.PublicKey) ssh.HostKeyCallback {
	if certHost(o) {
		return sshkeys.CAHostKeyCheck(known, o.principal)
	}
	return ssh.FixedHostKey(known)
}

func main() {
	o := parseOptions()
	clientName := "sshtimer"
	if o.openssh != "" {
		pub, err := os.ReadFile(o.knownHostKey)
		fields := strings.Fields(string(pub))
		if err != nil || len(fields) < 2 {
			fmt.Fprintf(os.Stderr, "sshtimer: --known-host-key: not a public key file\n")
			os.Exit(3)
		}
		oc := newOpensshClient(o, o.openssh, fields[0]+" "+fields[1])
		rc := loop(o, oc.run, "openssh-relay")
		os.RemoveAll(oc.dir)
		os.Exit(rc)
	}
	os.Exit(loop(o, goClient(o), clientName))
}

func goClient(o options) func(int) sample {
	if o.kexOnly {
		c := &client{o: o, kexAlg: o.kex}
		if o.knownHostKey != "" {
			hostKey, err := sshkeys.LoadPublic(o.knownHostKey)
			if err != nil {
				fmt.Fprintf(os.Stderr, "sshtimer: --known-host-key: %v\n", err)
				os.Exit(3)
			}
			c.checkHost = ssh.FixedHostKey(hostKey)
		}
		return c.run
	}
	signer, err := sshkeys.Load(o.identity)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshtimer: --identity: %v\n", err)
		os.Exit(3)
	}
	hostKey, err := sshkeys.LoadPublic(o.knownHostKey)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshtimer: --known-host-key: %v\n", err)
		os.Exit(3)
	}
	c := &client{o: o, signer: signer, checkHost: hostKeyCheck(o, hostKey), kexAlg: o.kex}
	return c.run
}

func loop(o options, runSample func(int) sample, clientName string) int {
	var claims *uint64
	if o.claim != "" {
		claims = mapClaims(o.claim)
	}
	out := json.NewEncoder(os.Stdout)
	failures := 0
	for k := -o.warmup; ; k++ {
		i := k
		if k >= 0 && claims != nil {
			v := atomic.AddUint64(claims, 1) - 1
			i = int(min(v, math.MaxInt32))
		}
		if i >= o.count {
			break
		}
		wait0 := cpuWaitNs()
		s := runSample(i)
		if wait1 := cpuWaitNs(); wait0 >= 0 && wait1 >= wait0 {
			d := wait1 - wait0
			s.CPUWaitNs = &d
		}
		s.Client = clientName
		if i < 0 {
			continue // warm-up: not recorded
		}
		if !s.OK {
			failures++
		}
		if err := out.Encode(&s); err != nil { // one line, written at once (stdout is unbuffered)
			return 3
		}
		time.Sleep(time.Duration(o.pauseMs) * time.Millisecond) // a target's gentle pace; 0 by default
	}
	if failures > 0 {
		return 1
	}
	return 0
}

// cpuWaitNs is how long this process's threads have waited for a CPU so far (ns), the sum of the
// second field of each thread's schedstat (Go runs the handshake on whichever threads its scheduler
// picks). -1 when unreadable.
func cpuWaitNs() int64 {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // a thread that ended meanwhile
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(b), &run, &wait); err == nil {
			total += wait
		}
	}
	return total
}
