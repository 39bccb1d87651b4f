package gotlskit

// The clock, the CPU wait and the shared sample counter: the same instruments pqtimer uses, so a Go
// sample joins the emulator's record of its connection exactly as a pqtimer sample does.

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MonoNs reads CLOCK_MONOTONIC_RAW, the clock pqtimer and the wire record use (Go's own monotonic
// clock is CLOCK_MONOTONIC, which NTP slews).
func MonoNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		panic(err) // Linux has had it since 2.6.28
	}
	return ts.Nano()
}

// CPUWaitNs is how long this process's threads have waited for a CPU so far (ns), the sum of the
// second field of each thread's schedstat: Go runs a handshake on whichever threads its scheduler
// picks, so the whole process stands for what pqtimer reads of its one thread. -1 when unreadable.
func CPUWaitNs() int64 {
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

// Claims is the cell's shared sample counter: 8 bytes, native order, in a file every worker maps.
type Claims struct{ p *uint64 }

func MapClaims(path string) (*Claims, error) {
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
	return &Claims{(*uint64)(unsafe.Pointer(&b[0]))}, nil
}

// Next claims the next sample index (fetch-and-add, as pqtimer's __atomic_fetch_add).
func (c *Claims) Next() int {
	i := atomic.AddUint64(c.p, 1) - 1
	if i > 1<<31-1 {
		return 1<<31 - 1
	}
	return int(i)
}
