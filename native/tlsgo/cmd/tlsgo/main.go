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

import kit "pqbench/native/gotlskit"

func main() {
	kit.Program = "tlsgo"
	kit.Main(kit.Command{Name: "client", Run: clientMain}, kit.Command{Name: "server", Run: serverMain},
		kit.Command{Name: "capabilities", Run: func([]string) int { return capabilitiesMain() }},
		kit.Command{Name: "clock-info", Run: func([]string) int { clockInfo(); return 0 }})
}
