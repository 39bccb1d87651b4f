package main

// TCP_INFO and the clock's own cost, as pqtimer reports them (the clock, CPU wait and sample counter
// are gotlskit's).

import (
	"fmt"
	"net"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	kit "pqbench/native/gotlskit"
)

// tcpCounts is TCP_INFO in pqtimer's shape.
type tcpCounts struct {
	BytesSent     uint64 `json:"bytes_sent"`
	BytesReceived uint64 `json:"bytes_received"`
	SegsOut       uint32 `json:"segs_out"`
	SegsIn        uint32 `json:"segs_in"`
	Retransmits   uint32 `json:"retransmits"` // tcpi_total_retrans
	RttUs         uint32 `json:"rtt_us"`
	Cwnd          uint32 `json:"cwnd"`
}

// tcpInfo reads TCP_INFO from the socket under conn; nil when the kernel will not say.
func tcpInfo(conn net.Conn) *tcpCounts {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return nil
	}
	return &tcpCounts{info.Bytes_sent, info.Bytes_received, info.Segs_out, info.Segs_in,
		info.Total_retrans, info.Rtt, info.Snd_cwnd}
}

// clockInfo: what the instrument itself costs (resolution and one read of the clock), as
// pqtimer --clock-info reports it.
func clockInfo() {
	const n = 200001
	t := make([]int64, n)
	for i := range t {
		t[i] = kit.MonoNs()
	}
	d := make([]int64, n-1)
	for i := 1; i < n; i++ {
		d[i-1] = t[i] - t[i-1]
	}
	sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
	var res unix.Timespec
	_ = unix.ClockGetres(unix.CLOCK_MONOTONIC_RAW, &res)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		_ = time.Now()
	}
	fmt.Printf("{\"clock\": \"CLOCK_MONOTONIC_RAW\", \"resolution_ns\": %d, \"read_median_ns\": %d, "+
		"\"read_p99_ns\": %d, \"go_time_now_ns\": %.1f}\n", res.Nano(), d[(n-1)/2], d[(n-1)*99/100],
		float64(time.Since(t0).Nanoseconds())/n)
}
