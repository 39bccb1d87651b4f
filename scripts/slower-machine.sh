#!/usr/bin/env bash
# Runs a command as a slower, busier machine would: `scripts/slower-machine.sh make test` (or `make test-slower`).
#
# What it emulates, on this machine:
#   slower  on each CPU a thread at the lowest real-time priority (SCHED_FIFO 1) takes STEAL_MS of every
#           PERIOD_MS (default 3 of 10): every normal task (the suite's Python, pytest, compilers, browsers,
#           servers at normal priority) gets 70 % of each CPU, in bursts, as on a VM whose host is
#           overcommitted (its "steal" time) or on a machine 1.4x slower for that work;
#   busier  HOGS (default 1) busy loops at normal priority compete for the CPUs with the command, as another
#           user's job does (scripts/test_workers.py then sees busy CPUs, as it would there).
# What pqbench measures runs at real-time priority 10 and pqlink at 50: both preempt the stealing threads at
# once, as they preempt any normal task on a real machine where pqbench may raise them.
# What it cannot emulate: a slower core for those real-time tasks (a slower CPU's crypto), slower disks or
# memory, another kernel's scheduler, a hypervisor's own wake-up latencies.
set -euo pipefail

STEAL_MS=${STEAL_MS:-3}
PERIOD_MS=${PERIOD_MS:-10}
HOGS=${HOGS:-1}
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG ...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root (real-time priority for the stealing threads)" >&2; exit 3; }

# One process per CPU, pinned there, at SCHED_FIFO 1: busy for STEAL_MS, asleep for the rest of the period.
STEAL='
import os, sys, time
cpu, steal, period = int(sys.argv[1]), float(sys.argv[2]) / 1e3, float(sys.argv[3]) / 1e3
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
t = time.monotonic()
while True:
    end = t + steal
    while time.monotonic() < end:
        pass
    t += period
    time.sleep(max(0.0, t - time.monotonic()))
'
helpers=()
cleanup() {
    for h in "${helpers[@]}"; do kill "$h" 2>/dev/null || true; done
    wait "${helpers[@]}" 2>/dev/null || true
}
trap cleanup EXIT
for cpu in $(python3 -c "import os; print(' '.join(map(str, sorted(os.sched_getaffinity(0)))))"); do
    python3 -c "$STEAL" "$cpu" "$STEAL_MS" "$PERIOD_MS" &
    helpers+=($!)
done
for _ in $(seq 1 "$HOGS"); do
    python3 -c "while True: pass" &
    helpers+=($!)
done
sleep 0.5
for h in "${helpers[@]}"; do kill -0 "$h" 2>/dev/null || { echo "$0: a load process did not start" >&2; exit 3; }; done
echo "[slower] $*: ${STEAL_MS} ms of every ${PERIOD_MS} ms of each CPU taken at real-time priority 1, $HOGS busy loop(s) beside" >&2
start=$(date +%s)
rc=0
"$@" || rc=$?
echo "[slower] exit $rc after $(( $(date +%s) - start )) s" >&2
exit $rc
