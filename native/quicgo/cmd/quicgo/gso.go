package main

// quic-go v0.65 sends with UDP GSO (UDP_SEGMENT) on Linux >= 5 when the socket allows it: one
// sendmsg then becomes several datagrams that the kernel splits late, and the emulator would see a
// burst where quic-go paced packets. Its only switch is the environment variable QUIC_GO_DISABLE_GSO,
// read when a Transport takes a socket, so it is set here for the whole process before any socket
// exists (whatever the caller's environment says). GRO: v0.65 never enables UDP_GRO on its sockets,
// so the kernel hands it datagrams one by one; nothing to turn off. The client goes further and gives
// quic-go a socket without sendmsg/recvmmsg at all (countingConn).

import "os"

func disableGSO() {
	_ = os.Setenv("QUIC_GO_DISABLE_GSO", "true")
}
