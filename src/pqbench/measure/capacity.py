"""A load cell (server capacity) on a rig: its plan's offered rates (pqbench.experiment.loadplan) in steps until
the server saturates, each step run by the client stack's load generator (loadgen), each step's server CPU from the kernel's accounting of the server's process tree, the client's from the
generator's own, the two sides pinned to different CPUs. Which side saturated decides what the cell
says: a client that fell behind its own schedule first gives no server capacity, only a lower bound."""

from __future__ import annotations

import datetime
import time

from pqbench import endpoints
from pqbench.algorithms import catalog
from pqbench.errors import BadInput
from pqbench.experiment.loadplan import LoadPlan
from pqbench.measure import cpu, loadgen

SATURATED_ACHIEVED = 0.9  # served under this share of what the arrivals offered
SATURATED_FAILED = 0.02  # failed or skipped arrivals over this share
KNEE = 5.0  # p50 latency over this many times the first step's
CLIENT_BUSY = 0.9  # the generator's CPU over this share of the step: it is the bottleneck
CLIENT_LAG_MS = 10.0  # the generator started arrivals this late (p99): it fell behind its schedule


def saturated(step: dict, first: dict | None) -> bool:
    offered, achieved = step["drawn_rate"], step["throughput"]
    lost = sum((step.get("failures") or {}).values()) + (step.get("skipped") or 0)
    p50 = (step.get("latency_ms") or {}).get("p50")
    base = ((first or {}).get("latency_ms") or {}).get("p50")
    return (achieved < SATURATED_ACHIEVED * offered or lost > SATURATED_FAILED * max(step.get("scheduled") or 0, 1)
            or (p50 is not None and base is not None and p50 > KNEE * base))


def client_bound(step: dict) -> str | None:
    """Why the generator, not the server, limited this step, or None."""
    busy = step.get("client_util") or 0
    lag = (step.get("start_lag_ms") or {}).get("p99") or 0
    if busy >= CLIENT_BUSY:
        return f"the load generator used {busy:.0%} of its CPU"
    if lag > CLIENT_LAG_MS:
        return f"the load generator started arrivals {lag:.1f} ms late (p99)"
    if step.get("skipped"):
        return f"the load generator skipped {step['skipped']} arrivals (too many in flight)"
    return None


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a load cell: the steps it finished (each whole), and the verdict they give."""

    def __init__(self, steps: list[dict], verdict: dict):
        super().__init__(f"interrupted after {len(steps)} steps")
        self.steps, self.verdict = steps, verdict


def measure(rig, server: str, gen, job, plan: LoadPlan, *, stop=None) -> tuple[list[dict], dict]:
    """(steps, verdict) for one load cell on a rig. verdict: saturated_by (server | client | None), the
    capacity (handshakes/s; None unless the server saturated), CPU per handshake at the last step."""
    roots = rig.server_pids[server]
    halves = cpu.split()
    if halves:
        cpu.pin(roots, halves[0])
    place = rig.place("client")
    steps: list[dict] = []
    started = time.monotonic()
    try:
        for rate in plan.schedule():
            if stop is not None and stop.is_set():
                break
            before = cpu.seconds(roots)
            r = catalog.respelled(loadgen.run(gen, place, job, rate, plan.step_ms, max_inflight=plan.max_inflight,
                                              seed=plan.seed, cpus=halves[1] if halves else None),
                                  endpoints.get(server).protocol)
            r["server_cpu_s"] = cpu.seconds(roots) - before
            wall = max(r.get("wall_s") or 0, r["duration_s"])  # the step's handshakes ran until the last completed
            # what the Poisson draw really offered (a short step's draw can be 30 % off the rate), and what was
            # served per second of the step's whole span (late completions stretch it: a saturated server shows)
            r["drawn_rate"] = (r.get("scheduled") or 0) / r["duration_s"]
            r["throughput"] = (r.get("completed") or 0) / wall
            r["server_util"] = r["server_cpu_s"] / wall
            r["client_util"] = (r.get("client_cpu_s") or 0) / wall
            r["client_bound"] = client_bound(r)
            r["saturated"] = saturated(r, steps[0] if steps else None)
            steps.append(r)
            if r["saturated"] or r["client_bound"] or time.monotonic() - started > plan.time_bound_s:
                break
    except KeyboardInterrupt:  # Ctrl-C: the steps that finished are kept (`pqbench load` prints them)
        raise Interrupted(steps, verdict(steps, halves)) from None
    return steps, verdict(steps, halves)


def verdict(steps: list[dict], halves) -> dict:
    last = steps[-1] if steps else {}
    by = "client" if last.get("client_bound") else "server" if last.get("saturated") else None
    done = max((s.get("throughput") or 0 for s in steps), default=0)
    per = lambda key: 1000 * last[key] / last["completed"] if last.get("completed") else None  # noqa: E731
    return {"saturated_by": by, "why": last.get("client_bound") if by == "client" else None,
            "capacity_hs": done if by == "server" else None, "at_least_hs": done,
            "server_cpu_ms_per_hs": per("server_cpu_s"), "client_cpu_ms_per_hs": per("client_cpu_s"),
            "server_util": last.get("server_util"), "client_util": last.get("client_util"),
            "pinned": {"server": sorted(halves[0]), "client": sorted(halves[1])} if halves else None,
            "steps": len(steps)}


def measure_cell(rig, plan: LoadPlan, link, tcp, job, server: str, client: str, *, stop=None) -> tuple[dict, str]:
    """A load cell on a rig: the cell's record fields (its steps under "steps") and why it stopped."""
    make = endpoints.get(client).load
    if make is None:
        raise BadInput("client", f"the {client} stack has no load generator")
    began = datetime.datetime.now()
    rig.begin_cell(link, tcp)
    steps, v = measure(rig, server, make(), job, plan, stop=stop)
    why = (f"the client saturated first ({v['why']}): at least {v['at_least_hs']:.0f} handshakes/s"
           if v["saturated_by"] == "client" else
           f"the server saturated at {v['capacity_hs']:.0f} handshakes/s" if v["saturated_by"] == "server" else
           "every rate of the plan ran without saturating")
    completed = sum(s.get("completed") or 0 for s in steps)
    classes: dict = {}
    for s in steps:
        for k, n in (s.get("failures") or {}).items():
            classes[k] = classes.get(k, 0) + n
    scheduled = sum(s.get("scheduled") or 0 for s in steps)
    died = rig.server_died(server)
    if died:  # a crashed server's steps measure the crash: failed, so --resume measures the cell again
        why = f"the {server} server died during the cell ({died}): measured again by --resume"
    return {"status": "done" if completed and not died else "failed", "reason": None if completed and not died else why,
            "link": link.to_dict(), "metric": "load", "n": scheduled, "ok": completed,
            "failures": scheduled - completed, "failure_classes": classes, "started": began,
            "finished": datetime.datetime.now(), "stop_reason": why, "kind": "load", "load": v, "steps": steps}, why
