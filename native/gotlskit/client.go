package gotlskit

// What both timing clients share: pqtimer's command line, t_ns, the outcome and the sample loop.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClientOptionNames are the options every timing client takes (pqtimer's); a stack adds its own.
var ClientOptionNames = []string{"--host", "--port", "--mode", "--path", "--groups", "--cafile", "--servername",
	"--count", "--warmup", "--timeout-ms", "--worker", "--claim", "--pause-ms"}

type ClientOptions struct {
	Host, Path, CAFile, ServerName string
	Port, Count, Warmup, Worker    int
	Timeout, Pause                 time.Duration
	Mode                           string
	Groups                         []tls.CurveID
	Claims                         *Claims
}

// ParseClientOptions reads ClientOptionNames; the stack checks --mode and its own options.
func ParseClientOptions(o Options) *ClientOptions {
	c := &ClientOptions{
		Host: o.Required("--host"), Port: o.Int("--port", 0, 1, 65535), Path: o.Str("--path", "/"),
		CAFile: o.Str("--cafile", ""), ServerName: o.Str("--servername", ""),
		Count: o.Int("--count", 1, 1, 100000000), Warmup: o.Int("--warmup", 0, 0, 1000000),
		Worker:  o.Int("--worker", 0, 0, 1<<31-1),
		Timeout: time.Duration(o.Int("--timeout-ms", 10000, 1, 3600000)) * time.Millisecond,
		Pause:   time.Duration(o.Int("--pause-ms", 0, 0, 3600000)) * time.Millisecond,
		Mode:    o.Str("--mode", "handshake"),
	}
	if c.Port == 0 {
		Usage("--port", "required")
	}
	if ip := net.ParseIP(c.Host); ip == nil || ip.To4() == nil {
		Usage("--host", "must be an IPv4 address")
	}
	groups, err := ParseGroups(o.Str("--groups", "X25519MLKEM768:x25519"))
	if err != nil {
		Usage("--groups", err.Error())
	}
	c.Groups = groups
	if p := o.Str("--claim", ""); p != "" {
		cl, err := MapClaims(p)
		if err != nil {
			Usage("--claim", err.Error())
		}
		c.Claims = cl
	}
	return c
}

// ClientTLSConfig is TLS 1.3 offering only the asked groups (one key share each), verifying against
// --cafile when given, else (as pqtimer without --cafile) not at all.
func (c *ClientOptions) ClientTLSConfig() *tls.Config {
	cfg := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		MaxVersion:       tls.VersionTLS13,
		CurvePreferences: c.Groups,
		ServerName:       c.ServerName,
	}
	if c.ServerName == "" {
		cfg.ServerName = c.Host
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			Usage("--cafile", err.Error())
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			Usage("--cafile", "no PEM certificate in this file")
		}
		cfg.RootCAs = pool
	} else {
		cfg.InsecureSkipVerify = true
	}
	return cfg
}

// PhasesJSON prints t_ns in the given key order: ns since t[0] (the start), null where not observed.
func PhasesJSON(names []string, t []int64) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: ", name)
		if i == 0 {
			b.WriteString("0")
		} else if t[i] == 0 {
			b.WriteString("null")
		} else {
			b.WriteString(strconv.FormatInt(t[i]-t[0], 10))
		}
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// Outcome is a sample's failure: its class and message, the first cause kept.
type Outcome struct{ Class, Msg string }

func (o *Outcome) Set(class, format string, a ...any) {
	if o.Class == "" {
		o.Class, o.Msg = class, fmt.Sprintf(format, a...)
	}
}

// Sample is what the loop needs of a stack's sample.
type Sample interface {
	SetCPUWait(ns int64) // the process's wait for a CPU while the sample ran
	Failed() bool
}

// RunSamples runs the warm-ups (not printed), then samples up to --count, their indexes claimed from
// the shared counter when there is one, each printed as one JSON line as soon as it is made.
// Exit status: 0, 1 when a sample failed, 3 when stdout cannot be written.
func RunSamples(c *ClientOptions, run func(i int) Sample) int {
	enc := json.NewEncoder(os.Stdout) // unbuffered
	failures := 0
	for k := -c.Warmup; ; k++ {
		i := k
		if k >= 0 && c.Claims != nil {
			i = c.Claims.Next()
		}
		if i >= c.Count {
			break
		}
		wait0 := CPUWaitNs()
		s := run(i)
		if wait1 := CPUWaitNs(); wait0 >= 0 && wait1 >= wait0 {
			s.SetCPUWait(wait1 - wait0)
		}
		if i < 0 {
			continue
		}
		if err := enc.Encode(s); err != nil {
			fmt.Fprintf(os.Stderr, "%s: cannot write the sample: %v\n", Program, err)
			return 3
		}
		if s.Failed() {
			failures++
		}
		time.Sleep(c.Pause) // a target's gentle pace; 0 by default
	}
	if failures > 0 {
		return 1
	}
	return 0
}

// SampleHead opens every sample line, in pqtimer's order; a stack's sample embeds it first and adds
// its own fields after.
type SampleHead struct {
	Worker      int     `json:"worker"`
	I           int     `json:"i"`
	Mode        string  `json:"mode"`
	OK          bool    `json:"ok"`
	ErrorClass  *string `json:"error_class"`
	Error       *string `json:"error"`
	TNs         Phases  `json:"t_ns"`
	StartMonoNs int64   `json:"start_mono_ns"`
	LocalPort   *int    `json:"local_port"`
}

// Phases is t_ns: the monotonic times by phase, t[0] the start, printed by PhasesJSON.
type Phases struct {
	names []string
	t     []int64
}

func (p Phases) MarshalJSON() ([]byte, error) { return PhasesJSON(p.names, p.t), nil }

// Finish records the phases (names in the sample's key order, t[0] the start) and the outcome.
func (h *SampleHead) Finish(names []string, t []int64, out *Outcome) {
	h.TNs = Phases{names, append([]int64(nil), t...)}
	h.StartMonoNs = t[0]
	h.OK = out.Class == ""
	if !h.OK {
		h.ErrorClass, h.Error = &out.Class, &out.Msg
	}
}

func (h *SampleHead) Failed() bool { return !h.OK }
