// dtlsgo: pion/dtls v4 (DTLS 1.3, RFC 9147) as a pqbench stack, one binary for both roles.
//
//	dtlsgo client --host ADDR --port N [--groups G] [--cafile F] [--servername NAME] [--count N]
//	              [--warmup N] [--timeout-ms T] [--worker K] [--claim FILE] [--pause-ms MS]
//	              [--transport udp] [--mtu BYTES]
//	    pqtimer's command line and sample format with the DTLS fields: one JSON object per sample on
//	    stdout (see client.go).
//	dtlsgo server --config FILE
//	    sites of a JSON file (server.go), each a UDP port completing DTLS 1.3 handshakes with exactly
//	    the groups given, with or without the cookie exchange.
//	dtlsgo capabilities   what this build does, tried in handshakes on loopback UDP (JSON)
//
// Exit: 0 ok (client: every sample succeeded), 1 some sample failed, 2 bad options (the message
// names the option), 3 setup impossible.
package main

import kit "pqbench/native/gotlskit"

func main() {
	kit.Program = "dtlsgo"
	kit.Main(kit.Command{Name: "client", Run: clientMain}, kit.Command{Name: "server", Run: serverMain},
		kit.Command{Name: "capabilities", Run: func([]string) int { return capabilitiesMain() }})
}
