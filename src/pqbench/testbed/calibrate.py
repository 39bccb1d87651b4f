"""Calibration: what the link really does, measured through it with kernel TCP and UDP.

- floor: TCP-connect RTT percentiles with everything configured to 0 (emulator + stack cost);
- rtt: the same at the requested delay (and jitter), and the error after subtracting the floor;
- loss: per direction, numbered UDP datagrams, observed rate with an exact (Clopper-Pearson) 99 %
  binomial interval, checked against the configured long-run loss and the emulator's own count;
- goodput: a TCP bulk transfer under the rate limit (when one is set), against the limit;
- lateness: how late the emulator released packets relative to their deadlines (pqlink only).
Each part runs with only the parameters it measures, by live reconfiguration of one testbed.
"""

from __future__ import annotations

import math
import time

from pqbench import stats
from pqbench.errors import MeasurementFailed
from pqbench.testbed import probe
from pqbench.testbed.linkspec import Aqm, Direction, LinkSpec, Loss, TcpKnobs
from pqbench.testbed.testbed import Testbed
from pqbench.testbed.backend_pqlink import EmulatorOptions

TCP_IPV4_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12


# --- statistics ------------------------------------------------------------------------------------

def percentiles(samples: list[float], qs=stats.PERCENTILES) -> dict:
    """Percentiles (linear interpolation, pqbench.stats) plus n, mean, min and max."""
    if not samples:
        return {"n": 0}
    xs = sorted(samples)
    out = {"n": len(xs), "mean": sum(xs) / len(xs), "min": xs[0], "max": xs[-1]}
    for q in qs:
        out[f"p{q}"] = stats.percentile(xs, q)
    return out


def _log_pmf(n: int, k: int, p: float) -> float:
    if p <= 0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1:
        return 0.0 if k == n else -math.inf
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed on the shorter side in log space."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0

    def logsum(terms):
        terms = [t for t in terms if t != -math.inf]
        if not terms:
            return 0.0
        m = max(terms)
        return math.exp(m) * sum(math.exp(t - m) for t in terms)

    if k < n / 2:
        return min(1.0, logsum(_log_pmf(n, i, p) for i in range(k + 1)))
    return max(0.0, 1.0 - logsum(_log_pmf(n, i, p) for i in range(k + 1, n + 1)))


def binomial_ci(k: int, n: int, confidence: float = 0.99) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for the probability behind k successes in n trials."""
    if n <= 0:
        return (0.0, 1.0)
    alpha = 1 - confidence

    def solve(f, target):  # f decreasing in p: find p with f(p) = target
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if f(mid) > target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(lambda p: binom_cdf(k - 1, n, p), 1 - alpha / 2)
    upper = 1.0 if k == n else solve(lambda p: binom_cdf(k, n, p), alpha / 2)
    return lower, upper


# --- the parts -----------------------------------------------------------------------------------

def _only(spec: LinkSpec, *, delay: bool = False, loss: bool = False, rate: bool = False) -> LinkSpec:
    """spec with only the chosen parameters kept (the others at 'nothing')."""
    def pick(d: Direction) -> Direction:
        return Direction(delay_ms=d.delay_ms if delay else 0.0, jitter_ms=d.jitter_ms if delay else 0.0,
                         loss=d.loss if loss else Loss(), rate_mbit=d.rate_mbit if rate else None,
                         queue_packets=d.queue_packets, queue_bytes=d.queue_bytes,
                         overhead_bytes=d.overhead_bytes, reorder=d.reorder,
                         trace=d.trace if rate else None, aqm=d.aqm if rate else Aqm())
    return spec.map_directions(pick)


def _lateness(counters: dict) -> dict:
    return {k: counters[k].get("lateness_us") for k in ("client_to_server", "server_to_client")}


def measure_floor(tb: Testbed, samples: int, realtime: bool = True) -> dict:
    """TCP connect times through the link at 0 ms, by a process at the measured processes' priority (realtime) or
    at a normal-priority client's (a browser's), with the latter's CPU stalls (probe.cpu_stalls)."""
    tb.reconfigure(_only(tb.spec))
    out = percentiles(probe.connect_rtts(tb, samples, realtime=realtime))
    if not realtime:  # such a client also loses the CPU it runs on (to real-time work, a host's steal): stall_p95
        out["stall_p95"] = percentiles(probe.cpu_stalls(samples))["p95"]
    return out


def measure_rtt(tb: Testbed, spec: LinkSpec, samples: int, floor_p50: float) -> dict:
    tb.reconfigure(_only(spec, delay=True))
    resettable = tb.backend_name == "pqlink"
    if resettable:
        tb.reset_counters()
    rtts = percentiles(probe.connect_rtts(tb, samples, timeout_s=max(10.0, spec.rtt_ms / 100)))
    out = {"configured_ms": spec.rtt_ms, "measured_ms": rtts,
           "error_p50_ms": rtts["p50"] - floor_p50 - spec.rtt_ms}
    if resettable:
        out["lateness_us"] = _lateness(tb.counters())
    return out


def measure_loss(tb: Testbed, spec: LinkSpec, packets: int, confidence: float = 0.99) -> dict:
    tb.reconfigure(_only(spec, loss=True))
    out = {}
    for direction, d in spec.directions.items():
        before = tb.counters()[direction]
        r = probe.udp_burst(tb, direction, packets)
        after = tb.counters()[direction]
        lost = len(r["missing"])
        lo, hi = binomial_ci(lost, packets, confidence)
        emu_lost = None if after.get("lost") is None else after["lost"] - before["lost"]
        dev = after.get("device_drops")
        dev_before = before.get("device_drops")
        out[direction] = {
            "configured": d.loss.mean, "model": d.loss.model, "sent": packets, "lost": lost,
            "rate": lost / packets, f"ci{round(confidence * 100)}": [lo, hi],
            "consistent": lo <= d.loss.mean <= hi, "emulator_lost": emu_lost,
            "device_drops": None if dev is None or dev_before is None else dev - dev_before,
        }
        if d.loss.model == "gemodel":
            out[direction]["note"] = "losses are correlated under Gilbert-Elliott: the binomial interval is too narrow"
    return out


def measure_goodput(tb: Testbed, spec: LinkSpec, seconds: float) -> dict | None:
    """TCP goodput client->server and server->client under the rate limit (with the delay)."""
    if all(d.rate_mbit is None for d in spec.directions.values()):
        return None
    tb.reconfigure(_only(spec, delay=True, rate=True))
    out = {}
    for direction, d in spec.directions.items():
        if d.rate_mbit is None:
            continue
        # slow start is left out: about 10 RTTs, at most half of the transfer
        skip = min(seconds / 2, max(0.2, 10 * spec.rtt_ms / 1e3))
        r = probe.tcp_transfer(tb, direction, seconds=seconds, skip_s=skip)
        payload = spec.mtu - TCP_IPV4_HEADERS
        expected = d.rate_mbit * payload / (spec.mtu + d.overhead_bytes)
        out[direction] = {"rate_mbit": d.rate_mbit, "goodput_mbit": r["goodput_mbit"], "skipped_s": skip,
                          "goodput_from_first_byte_mbit": r["goodput_total_mbit"],
                          "ratio_to_rate": r["goodput_mbit"] / d.rate_mbit,
                          "expected_goodput_mbit": expected, "ratio_to_expected": r["goodput_mbit"] / expected,
                          "intact": r["intact"]}
    return out


def calibrate(spec: LinkSpec, *, tcp: TcpKnobs | None = None, backend: str = "auto",
              emulator: EmulatorOptions | None = None, floor_samples: int = 200, rtt_samples: int | None = None,
              loss_packets: int = 20000, goodput_seconds: float = 3.0, progress=None) -> dict:
    """Runs every part on one fresh testbed and returns the report (see module doc)."""
    say = progress or (lambda msg: None)
    t0 = time.monotonic()
    if rtt_samples is None:  # about 5 s of sequential connects, within 20..200
        rtt_samples = int(min(200, max(20, 5000 / max(spec.rtt_ms, 1.0))))
    with Testbed(_only(spec), tcp=tcp, backend=backend, emulator=emulator) as tb:
        report = {"testbed": tb.name, "backend": tb.backend_name, "spec": spec.to_dict(), "link": spec.describe(),
                  "tcp": (tcp or TcpKnobs()).to_dict()}
        say(f"floor: {floor_samples} TCP connects at 0 ms")
        floor = measure_floor(tb, floor_samples)
        report["floor_rtt_ms"] = floor
        say(f"rtt: {rtt_samples} TCP connects at {spec.rtt_ms:g} ms")
        report["rtt"] = measure_rtt(tb, spec, rtt_samples, floor["p50"])
        if any(d.loss.model != "none" for d in spec.directions.values()):
            say(f"loss: {loss_packets} UDP datagrams each way")
            report["loss"] = measure_loss(tb, spec, loss_packets)
        else:
            report["loss"] = None
        if any(d.rate_mbit is not None for d in spec.directions.values()):
            say(f"goodput: {goodput_seconds:g} s of TCP each limited direction")
        report["goodput"] = measure_goodput(tb, spec, goodput_seconds)
        tb.reconfigure(spec)
        report["emulator"] = tb.counters().get("emulator") if tb.backend_name == "pqlink" else None
    report["seconds"] = time.monotonic() - t0
    failures = []
    if report["loss"]:
        for k, v in report["loss"].items():
            if v["device_drops"]:
                failures.append(f"{k}: {v['device_drops']} packets dropped by the kernel before the emulator")
    report["warnings"] = failures
    if report["rtt"]["measured_ms"]["n"] == 0:
        raise MeasurementFailed("no RTT samples")
    return report


def summary_lines(r: dict) -> list[str]:
    """The report as a few readable lines."""
    f, rtt = r["floor_rtt_ms"], r["rtt"]
    m = rtt["measured_ms"]
    lines = [f"testbed {r['testbed']} ({r['backend']}): {r['link']}",
             f"floor (0 ms): TCP connect p50 {f['p50']:.3f} ms, p95 {f['p95']:.3f} ms (n={f['n']})",
             f"RTT {rtt['configured_ms']:g} ms: p5 {m['p5']:.3f} p50 {m['p50']:.3f} p95 {m['p95']:.3f} "
             f"p99 {m['p99']:.3f} ms (n={m['n']}); p50 - floor - configured = {rtt['error_p50_ms'] * 1000:+.0f} us"]
    for d, late in (rtt.get("lateness_us") or {}).items():
        if late:
            lines.append(f"lateness {d}: p50 {late['p50']:.1f} us, p99 {late['p99']:.1f} us, max {late['max']:.1f} us")
    for d, v in (r.get("loss") or {}).items():
        ci = v.get("ci99")
        lines.append(f"loss {d}: {v['lost']}/{v['sent']} = {v['rate'] * 100:.3f} % (99 % CI {ci[0] * 100:.3f}.."
                     f"{ci[1] * 100:.3f} %), configured {v['configured'] * 100:.3g} % "
                     f"{'OK' if v['consistent'] else 'OUTSIDE the interval'}; emulator counted {v['emulator_lost']}")
    for d, g in (r.get("goodput") or {}).items():
        lines.append(f"goodput {d}: {g['goodput_mbit']:.2f} Mbit/s at a {g['rate_mbit']:g} Mbit/s limit "
                     f"({g['ratio_to_rate'] * 100:.1f} %; {g['ratio_to_expected'] * 100:.1f} % of the TCP payload share)")
    lines += [f"warning: {w}" for w in r.get("warnings", [])]
    return lines
