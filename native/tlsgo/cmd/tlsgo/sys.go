package main

// The clock, TCP_INFO and the shared sample counter: the same instruments pqtimer uses, so a Go
// sample joins the emulator's record of its connection exactly as a pqtimer sample does.

import (
	"fmt"
	"net"
	"os"
	"sort"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// monoNs reads CLOCK_MONOTONIC_RAW, the clock pqtimer and the wire record use (Go's own monotonic
// clock is CLOCK_MONOTONIC, which NTP slews).
func monoNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		panic(err) // Linux has had it since 2.6.28
	}
	return ts.Nano()
}

// cpuWaitNs is how long this process's threads have waited for a CPU so far (ns), the sum of the
// second field of each thread's schedstat: Go runs a handshake on whichever threads its scheduler
// picks, so the whole process stands for what pqtimer reads of its one thread. -1 when unreadable.
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

// claims is the cell's shared sample counter: 8 bytes, native order, in a file every worker maps.
type claims struct{ p *uint64 }

func mapClaims(path string) (*claims, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 8 {
		return nil, fmt.Errorf("the file must hold a 64-bit counter (8 bytes)") // else SIGBUS on use
	}
	b, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &claims{(*uint64)(unsafe.Pointer(&b[0]))}, nil
}

// next claims the next sample index (fetch-and-add, as pqtimer's __atomic_fetch_add).
func (c *claims) next() int {
	i := atomic.AddUint64(c.p, 1) - 1
	if i > 1<<31-1 {
		return 1<<31 - 1
	}
	return int(i)
}

// clockInfo: what the instrument itself costs (resolution and one read of the clock), as
// pqtimer --clock-info reports it.
func clockInfo() {
	const n = 200001
	t := make([]int64, n)
	for i := range t {
		t[i] = monoNs()
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
