// quicgo: quic-go (HTTP/3 over QUIC, TLS 1.3 by Go's crypto/tls) as a pqbench stack, one binary for both roles.
//
//	quicgo client --host ADDR --port N [--mode handshake|page] [--path /1k] [--groups G] [--cafile F]
//	              [--servername NAME] [--count N] [--warmup N] [--timeout-ms T] [--worker K]
//	              [--claim FILE] [--pause-ms MS] [--transport quic] [--initial-size BYTES]
//	    pqtimer's command line and sample format with the QUIC fields: one JSON object per sample on
//	    stdout (see client.go).
//	quicgo server --config FILE
//	    sites of a JSON file (server.go), each a UDP port serving HTTP/3; TLS 1.3 only, exactly the
//	    groups given, pages of random bytes by name, Retry per site.
//	quicgo capabilities   what this build does over QUIC, tried in handshakes on loopback UDP (JSON)
//
// UDP segmentation offload is off in both roles: one datagram quic-go sends is one packet on the
// emulated link (gso.go).
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
	disableGSO()
	if len(os.Args) < 2 {
		usage("a subcommand", "client, server, capabilities")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "client":
		os.Exit(clientMain(args))
	case "server":
		os.Exit(serverMain(args))
	case "capabilities":
		os.Exit(capabilitiesMain())
	default:
		usage(os.Args[1], "unknown subcommand (allowed: client, server, capabilities)")
	}
}

func usage(field, msg string) {
	fmt.Fprintf(os.Stderr, "quicgo: %s: %s\n", field, msg)
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
