"""How many pytest-xdist workers `make test` runs its first pass on: 4 when this machine's CPUs are idle, none
(the tests one after another) when something else keeps them busy. Beside a CPU hog, four workers' real-time
timing clients left too little CPU for the rest: 18 tests failed, most of them Ctrl-C tests whose pqbench did
not start within 60 s. The CPUs' idle share is read from /proc/stat over one second."""

import os
import time

WORKERS = 4
BUSY_CPUS = 0.5  # more than this many CPUs' worth busy: run the tests one after another


def busy_cpus(seconds: float = 1.0) -> float:
    def sample():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    ncpu = os.cpu_count() or 1
    return ncpu * (1 - (idle1 - idle0) / max(1, total1 - total0))


if __name__ == "__main__":
    print(WORKERS if busy_cpus() <= BUSY_CPUS else 0)
