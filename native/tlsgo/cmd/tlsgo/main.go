// tlsgo: Go's crypto/tls as a pqbench stack, one binary for both roles.
//
//	tlsgo client --host ADDR --port N [--mode handshake|page|requests|resume] [--path /1k] [--requests N]
//	             [--groups G] [--cafile F] [--servername NAME] [--count N] [--warmup N]
//	             [--timeout-ms T] [--worker K] [--claim FILE] [--pause-ms MS]
//	    pqtimer's command line and sample format: one JSON object per sample on stdout (see client.go).
//	tlsgo server --addr ADDR --site PORT,CHAIN_PEM,KEY_PEM [--site ...] --groups G1:G2
//	             [--page NAME=BYTES ...] [--log FILE]
//	    TLS 1.3 only, exactly the groups given, HTTP/1.1 keep-alive: GET /NAME returns BYTES random bytes.
//	tlsgo capabilities   what this build of crypto/tls does, tried in handshakes in memory (JSON)
//	tlsgo clock-info     resolution and cost of the clock (JSON)
//
// Exit: 0 ok (client: every sample succeeded), 1 some sample failed, 2 bad options (the message
// names the option), 3 setup impossible.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage("a subcommand", "client, server, capabilities, clock-info")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "client":
		os.Exit(clientMain(args))
	case "server":
		os.Exit(serverMain(args))
	case "capabilities":
		os.Exit(capabilitiesMain())
	case "clock-info":
		clockInfo()
	default:
		usage(os.Args[1], "unknown subcommand (allowed: client, server, capabilities, clock-info)")
	}
}

func usage(field, msg string) {
	fmt.Fprintf(os.Stderr, "tlsgo: %s: %s\n", field, msg)
	os.Exit(2)
}

// options: "--name value" pairs; repeated names keep every value.
type options map[string][]string

func parseOptions(args []string, allowed ...string) options {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	o := options{}
	for i := 0; i < len(args); i += 2 {
		name := args[i]
		if !ok[name] {
			usage(name, "unknown option (allowed: "+strings.Join(allowed, " ")+")")
		}
		if i+1 >= len(args) {
			usage(name, "missing value")
		}
		o[name] = append(o[name], args[i+1])
	}
	return o
}

func (o options) str(name, def string) string {
	if v := o[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

func (o options) required(name string) string {
	v := o.str(name, "")
	if v == "" {
		usage(name, "required")
	}
	return v
}

func (o options) int(name string, def, lo, hi int) int {
	s := o.str(name, "")
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		usage(name, fmt.Sprintf("'%s' is not a whole number in %d..%d", s, lo, hi))
	}
	return v
}
