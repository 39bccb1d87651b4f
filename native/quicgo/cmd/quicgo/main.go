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

import kit "pqbench/native/gotlskit"

func main() {
	kit.Program = "quicgo"
	disableGSO()
	kit.Main(kit.Command{Name: "client", Run: clientMain}, kit.Command{Name: "server", Run: serverMain},
		kit.Command{Name: "capabilities", Run: func([]string) int { return capabilitiesMain() }})
}
