// sshload: an open-loop SSH load generator (golang.org/x/crypto/ssh), for server capacity. Arrivals
// are a Poisson process at --rate per second for --duration-ms (exponential gaps from a PRNG seeded by
// --seed); at each arrival a goroutine connects, runs the key exchange --kex names up to NEWKEYS both
// ways (any host key accepted, no account: like sshtimer --kex-only) and closes the connection there,
// so the server's authentication work is not part of what is loaded. Arrivals never wait for earlier
// connections; when the generator falls behind its schedule the lag is measured (start_lag_ms) and
// counts in latency_ms, which runs from the scheduled arrival, not from the dial.
//
//	sshload --host IPv4 --port N --kex NAME --rate R --duration-ms D [--timeout-ms T] [--max-inflight K]
//	        [--seed S] [--latencies]
//
// After the last arrival it waits for the connections in flight (each up to --timeout-ms from its
// dial) and prints one JSON object (see summary; pqload prints the same). An arrival that finds
// --max-inflight connections in flight is not started and counts as skipped.
//
// GOGC is 400 unless the environment sets it (see main). GOMAXPROCS is left to the runtime, which sets it from the CPUs the process may run on (its affinity
// mask, so a caller's pinning with taskset is honoured) and any cgroup CPU limit.
//
// Exit: 0 it ran (failed handshakes are data), 2 bad options, 3 setup impossible.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"pqbench/native/sshgo/internal/sshkeys"
	"pqbench/native/sshgo/internal/sshwire"
)

// maxArrivals bounds rate × duration: every arrival keeps a result until the summary.
const maxArrivals = 2_000_000

type options struct {
	host, kex                   string
	port, durationMs, timeoutMs int
	maxInflight                 int
	rate                        float64
	seed                        uint64
	latencies                   bool
}

func usage(field, why string) {
	fmt.Fprintf(os.Stderr, "sshload: %s: %s\n", field, why)
	os.Exit(2)
}

func setupFailed(why string) {
	fmt.Fprintf(os.Stderr, "sshload: %s\n", why)
	os.Exit(3)
}

func parseOptions(args []string) (options, string, string) {
	var o options
	fs := flag.NewFlagSet("sshload", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.host, "host", "", "")
	fs.IntVar(&o.port, "port", 0, "")
	fs.StringVar(&o.kex, "kex", "", "")
	fs.Float64Var(&o.rate, "rate", 0, "")
	fs.IntVar(&o.durationMs, "duration-ms", 0, "")
	fs.IntVar(&o.timeoutMs, "timeout-ms", 10000, "")
	fs.IntVar(&o.maxInflight, "max-inflight", 4096, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.BoolVar(&o.latencies, "latencies", false, "")
	if err := fs.Parse(args); err != nil {
		return o, "options", err.Error() // the flag package names the option in its message
	}
	ip := net.ParseIP(o.host)
	switch {
	case fs.NArg() > 0:
		return o, "options", fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case o.host == "":
		return o, "--host", "required"
	case ip == nil || ip.To4() == nil:
		return o, "--host", fmt.Sprintf("%q is not an IPv4 address", o.host)
	case o.port < 1 || o.port > 65535:
		return o, "--port", "must be 1..65535"
	case o.kex == "":
		return o, "--kex", "required"
	case !(o.rate > 0) || math.IsInf(o.rate, 0):
		return o, "--rate", "must be a number > 0 (arrivals per second)"
	case o.durationMs < 1:
		return o, "--duration-ms", "must be >= 1"
	case o.timeoutMs < 1:
		return o, "--timeout-ms", "must be >= 1"
	case o.maxInflight < 1:
		return o, "--max-inflight", "must be >= 1"
	case o.rate*float64(o.durationMs)/1000 > maxArrivals:
		return o, "--rate", fmt.Sprintf("--rate × --duration-ms expects more than %d arrivals", maxArrivals)
	}
	if err := sshkeys.Supported(o.kex, ""); err != nil {
		return o, "--kex", err.Error()
	}
	return o, "", ""
}

// schedule: the arrival offsets of a Poisson process of rate per second over [0, d), exponential gaps
// from a PCG seeded by seed (the same seed, the same arrivals).
func schedule(rate float64, d time.Duration, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 0x73_73_68_6c_6f_61_64)) // second word fixed: "sshload"
	var out []time.Duration
	t := 0.0
	for {
		t += rng.ExpFloat64() / rate
		at := time.Duration(t * float64(time.Second))
		if at >= d {
			return out
		}
		out = append(out, at)
	}
}

// result of one arrival; written only by the goroutine that ran it, read after all are done.
type result struct {
	started, completed bool
	class              string
	start, done        time.Time
	kex                string
}

// watch follows both directions of the connection up to NEWKEYS (internal/sshwire) and closes the
// connection once NEWKEYS has gone both ways: the key exchange is what is loaded, so the client neither
// asks for authentication nor waits for its refusal.
type watch struct {
	net.Conn
	mu         sync.Mutex
	sent, recv sshwire.Stream
	ident      bool // the server's identification line arrived
	sentNK     bool
	recvNK     bool
	done       time.Time
}

func (w *watch) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if n > 0 {
		now := time.Now()
		w.mu.Lock()
		for _, e := range w.recv.Feed(b[:n]) {
			switch e.Msg {
			case -1:
				w.ident = true
			case sshwire.MsgNewKeys:
				w.recvNK = true
				w.finish(now)
			}
		}
		closing := !w.done.IsZero()
		w.mu.Unlock()
		if closing { // the library still gets these bytes; its next read or write fails, as wanted
			_ = w.Conn.Close()
		}
	}
	return n, err
}

func (w *watch) Write(b []byte) (int, error) {
	now := time.Now() // as sshtimer: NEWKEYS is sent when it is handed to the kernel
	w.mu.Lock()
	if !w.done.IsZero() { // what follows NEWKEYS (the service request) is not sent
		w.mu.Unlock()
		return 0, net.ErrClosed
	}
	for _, e := range w.sent.Feed(b) {
		if e.Msg == sshwire.MsgNewKeys {
			w.sentNK = true
			w.finish(now)
		}
	}
	closing := !w.done.IsZero()
	w.mu.Unlock()
	n, err := w.Conn.Write(b)
	if closing { // after the write, so our NEWKEYS reaches the server before the FIN
		_ = w.Conn.Close()
	}
	return n, err
}

// finish records the moment the second NEWKEYS passed; the caller holds w.mu.
func (w *watch) finish(now time.Time) {
	if w.sentNK && w.recvNK && w.done.IsZero() {
		w.done = now
	}
}

// outcome: when NEWKEYS had gone both ways (zero if not), the key exchange the two KEXINITs agree
// on, and how far the connection got.
func (w *watch) outcome() (done time.Time, kex, stage string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kex, _ = sshwire.Negotiated(w.sent.Kexinit, w.recv.Kexinit)
	stage = "identification exchange"
	if w.ident {
		stage = "key exchange"
	}
	return w.done, kex, stage
}

type loader struct {
	o        options
	addr     string
	timeout  time.Duration
	inflight atomic.Int64
}

func (l *loader) connect(r *result) {
	r.started, r.start = true, time.Now()
	d := net.Dialer{Timeout: l.timeout}
	conn, err := d.Dial("tcp", l.addr)
	if err != nil {
		r.class, _ = sshwire.ClassifyDial(err)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(r.start.Add(l.timeout))
	w := &watch{Conn: conn}
	cfg := &ssh.ClientConfig{
		Config:          ssh.Config{KeyExchanges: []string{l.o.kex}},
		User:            "pqbench",
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // capacity, not identity: any host key will do
		ClientVersion:   "SSH-2.0-pqbench_sshload",
	}
	sc, _, _, err := ssh.NewClientConn(w, l.addr, cfg)
	if sc != nil { // a server that let us in without authentication: the key exchange still counts
		_ = sc.Close()
	}
	done, kex, stage := w.outcome()
	if !done.IsZero() { // NEWKEYS both ways: what failed after it (our own close) is not the server's
		r.completed, r.done, r.kex = true, done, kex
		return
	}
	if err == nil {
		err = fmt.Errorf("the connection ended before NEWKEYS both ways")
	}
	r.class, _ = sshwire.Classify(err, stage)
}

// alarm sleeps until a time on the monotonic clock through a timerfd that Go's netpoller waits on:
// it wakes within tens of microseconds, where time.Sleep's timers (the poller's millisecond timeout)
// overshoot by up to a millisecond, which would count in every latency. No busy wait: the generator's
// CPU is what it reports.
type alarm struct {
	fd  int
	f   *os.File
	buf [8]byte
}

func newAlarm() *alarm {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sshload: timerfd: %v (scheduling with time.Sleep instead)\n", err)
		return nil
	}
	return &alarm{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")} // non-blocking: read through the poller
}

func (a *alarm) sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return // behind schedule: start at once; the lag is measured by the connection
	}
	if a != nil {
		v := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
		if unix.TimerfdSettime(a.fd, 0, &v, nil) == nil {
			if _, err := a.f.Read(a.buf[:]); err == nil {
				return
			}
		}
	}
	time.Sleep(time.Until(t))
}

// run starts the arrivals at their times from now and returns the results, the time of the schedule's
// zero and the largest number of connections in flight.
func (l *loader) run(arrivals []time.Duration) ([]result, time.Time, int64) {
	results := make([]result, len(arrivals))
	var wg sync.WaitGroup
	var peak int64
	clock := newAlarm()
	t0 := time.Now()
	for i, at := range arrivals {
		clock.sleepUntil(t0.Add(at))
		if l.inflight.Load() >= int64(l.o.maxInflight) {
			continue // skipped: results[i].started stays false
		}
		// only this loop adds to inflight, so the peak is seen here
		peak = max(peak, l.inflight.Add(1))
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			defer l.inflight.Add(-1)
			l.connect(r)
		}(&results[i])
	}
	wg.Wait()
	return results, t0, peak
}

type latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

type service struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

type lag struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type summary struct {
	Generator    string         `json:"generator"`
	OfferedRate  float64        `json:"offered_rate"`
	DurationS    float64        `json:"duration_s"`
	Scheduled    int            `json:"scheduled"`
	Started      int            `json:"started"`
	Completed    int            `json:"completed"`
	Failures     map[string]int `json:"failures"`
	Skipped      int            `json:"skipped"`
	InflightMax  int64          `json:"inflight_max"`
	LatencyMs    *latency       `json:"latency_ms"`
	ServiceMs    *service       `json:"service_ms"`
	StartLagMs   *lag           `json:"start_lag_ms"`
	AchievedRate float64        `json:"achieved_rate"`
	WallS        *float64       `json:"wall_s"`
	ClientCPUS   float64        `json:"client_cpu_s"`
	Group        *string        `json:"group"`
	LatenciesMs  *[]float64     `json:"latencies_ms,omitempty"` // nil: not asked
}

// quantile of sorted xs by linear interpolation between the closest ranks (numpy's default), so the
// Python side computes the same figure from latencies_ms.
func quantile(xs []float64, q float64) float64 { return round3(rawQuantile(xs, q)) }

func rawQuantile(xs []float64, q float64) float64 {
	if len(xs) == 1 {
		return xs[0]
	}
	h := q * float64(len(xs)-1)
	lo := int(math.Floor(h))
	if lo >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[lo] + (h-float64(lo))*(xs[lo+1]-xs[lo])
}

func ms(d time.Duration) float64 { return round3(float64(d) / 1e6) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func summarise(o options, arrivals []time.Duration, results []result, t0 time.Time, peak int64,
	cpuS float64) summary {
	s := summary{Generator: "sshload", OfferedRate: o.rate, DurationS: float64(o.durationMs) / 1000,
		Scheduled: len(arrivals), Failures: map[string]int{}, InflightMax: peak, ClientCPUS: round3(cpuS)}
	var lat, svc, lags []float64
	var first, last time.Time
	for i, r := range results {
		if !r.started {
			s.Skipped++
			continue
		}
		s.Started++
		sched := t0.Add(arrivals[i])
		lags = append(lags, ms(r.start.Sub(sched)))
		if !r.completed {
			s.Failures[r.class]++
			continue
		}
		s.Completed++
		lat = append(lat, ms(r.done.Sub(sched)))
		svc = append(svc, ms(r.done.Sub(r.start)))
		if first.IsZero() || r.done.Before(first) {
			first = r.done
			kex := r.kex
			s.Group = &kex
		}
		if r.done.After(last) {
			last = r.done
		}
	}
	if o.latencies {
		all := append([]float64{}, lat...) // arrival order, before lat is sorted
		s.LatenciesMs = &all
	}
	if len(lat) > 0 {
		mean := 0.0
		for _, x := range lat {
			mean += x
		}
		mean /= float64(len(lat))
		slices.Sort(lat)
		slices.Sort(svc)
		s.LatencyMs = &latency{quantile(lat, .5), quantile(lat, .9), quantile(lat, .99), lat[len(lat)-1], round3(mean)}
		s.ServiceMs = &service{quantile(svc, .5), quantile(svc, .9), quantile(svc, .99)}
		w := round3(last.Sub(t0.Add(arrivals[0])).Seconds())
		s.WallS = &w
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		s.StartLagMs = &lag{quantile(lags, .5), quantile(lags, .99), lags[len(lags)-1]}
	}
	s.AchievedRate = round3(float64(s.Completed) / s.DurationS)
	return s
}

func cpuSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), nil
}

// ensureFiles: K connections in flight need K descriptors; Go raises the soft limit to the hard one
// at start-up, and a hard limit too low for --max-inflight is a setup the run cannot have.
func ensureFiles(k int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		setupFailed("RLIMIT_NOFILE: " + err.Error())
	}
	need := uint64(k) + 64 // stdio, the runtime's own descriptors
	if rl.Cur >= need {
		return
	}
	if rl.Max < need {
		setupFailed(fmt.Sprintf("--max-inflight %d needs %d open files; the hard limit is %d", k, need, rl.Max))
	}
	rl.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		setupFailed("raising RLIMIT_NOFILE: " + err.Error())
	}
}

func main() {
	o, field, why := parseOptions(os.Args[1:])
	if field != "" {
		usage(field, why)
	}
	ensureFiles(o.maxInflight)
	if os.Getenv("GOGC") == "" {
		// Fewer collections: after each one the runtime's background sweeper can spin (Gosched in a loop
		// while another sweeper's thread is descheduled) when the CPUs are contended, as beside a saturated
		// server, and that burns CPU the generator would report as its own. Measured against sshd at
		// 200/s on shared CPUs, for the same 399 handshakes: client_cpu_s 0.35-2.9 s with GOGC=100,
		// 0.38-0.41 s with 400. The heap stays small next to the connections' kernel buffers.
		debug.SetGCPercent(400)
	}
	arrivals := schedule(o.rate, time.Duration(o.durationMs)*time.Millisecond, o.seed)
	l := &loader{o: o, addr: net.JoinHostPort(o.host, strconv.Itoa(o.port)),
		timeout: time.Duration(o.timeoutMs) * time.Millisecond}
	var results []result
	var t0 time.Time
	var peak int64
	if len(arrivals) > 0 {
		results, t0, peak = l.run(arrivals)
	}
	cpu, err := cpuSeconds()
	if err != nil {
		setupFailed("getrusage: " + err.Error())
	}
	if err := json.NewEncoder(os.Stdout).Encode(summarise(o, arrivals, results, t0, peak, cpu)); err != nil {
		setupFailed("writing the summary: " + err.Error())
	}
}
