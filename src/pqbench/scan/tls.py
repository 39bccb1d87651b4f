"""What a TLS 1.3 server accepts and prefers, asked with pqtimer (our OpenSSL's timing client), one
connection at a time with a short pause between.

- accepted groups: one ClientHello per TLS group this build has, offering that group alone;
- preference: every accepted group in supported_groups and a key share only for a group the server
  rejected (the decoy), so the server must answer with a HelloRetryRequest naming its favourite;
  offered again with that favourite moved last: if the server still picks it, it is its first choice,
  otherwise it takes the client's order among a set of equals (OpenSSL's default, whose group tuples
  rank sets of groups, not groups);
- HelloRetryRequest per key share: each accepted group's share with the others listed after it; an HRR
  means a client that predicts that share pays a round trip;
- the probes of what breaks in the field (pqbench.scan.probes: a split and an oversized ClientHello,
  the first flight against TCP's and QUIC's first-round budgets, a client predicting X25519, QUIC tried on
  the UDP port);
- the chain (signature scheme, DER size and signer of each certificate, verification result) and the
  handshake time per accepted group over n samples, p50 with its 95 % bootstrap CI.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import threading
import time
from typing import Callable

from pqbench import endpoints, stats
from pqbench.algorithms import catalog
from pqbench.endpoints.base import ClientJob, Place
from pqbench.remote.address import Address
from pqbench.scan import failure, pq
from pqbench.scan import probes as field_probes
from pqbench.testbed import registry
from pqbench.testbed.realpath import connect_rtt

SCAN_CLIENT = "openssl"  # pqtimer: it can offer any key-share list and record verification without enforcing it
PAUSE_S = 0.05  # between connections to one target
MAX_RUNS = 400  # pqtimer runs per target: the catalog's groups, a few per accepted group and the probes
DEAD_AFTER = 2  # consecutive connection failures after which a target is taken for unreachable
LOOK_S = 0.1  # how often a pqtimer run looks whether the scan was stopped
# A probe that got no answer of the server's (it timed out, the path was unreachable, pqtimer died) decides
# nothing: it is tried again this many times, every failed attempt kept in the result. A busy machine made one
# preference probe of a tie server fail, and the scan turned that into "preference unknown" (issue 45).
RETRIES = 1
NO_ANSWER = ("timeout", "unreachable", "pqtimer")


class Stopped(Exception):
    """The scan was stopped (Ctrl-C): what it found so far is incomplete and is not a result."""


@dataclasses.dataclass
class TlsProber:
    """Runs pqtimer against one target from place; every run is counted and paced."""
    address: Address
    place: Place
    servername: str
    cafile: str | None = None
    timeout_ms: int = 5000
    pause_s: float = PAUSE_S
    runs: int = 0
    stop: threading.Event | None = None  # set: the run in progress is killed and Stopped raised
    pace: object | None = None  # pqbench.scan.polite.Pace: every connection takes a slot of the global rate

    def argv(self, groups: str, count: int, warmup: int, via: tuple[str, int] | None = None,
             transport: str = "tcp") -> list[str]:
        """The openssl stack's client (pqtimer), through the endpoint seam, recording verification. via:
        connect there instead (a relay of the scan's), the target's name kept."""
        host, port = via or (self.address.ip, self.address.port)
        pause_s = max(self.pause_s, self.pace.interval) if self.pace is not None else self.pause_s
        job = ClientJob(host=host, port=port, groups=[groups], cafile=self.cafile,
                        servername=self.servername, warmup=warmup, timeout_ms=self.timeout_ms,
                        pause_ms=round(pause_s * 1000) if count + warmup > 1 else 0, transport=transport)
        return endpoints.get(SCAN_CLIENT, "client").client().argv(job, count, 0, None) + ["--verify", "record"]

    def run(self, groups: str, count: int = 1, warmup: int = 0, via: tuple[str, int] | None = None,
            transport: str = "tcp") -> list[dict]:
        """count samples offering `groups` (OpenSSL's list syntax: `*` marks the key shares)."""
        if self.runs >= MAX_RUNS:
            raise RuntimeError(f"more than {MAX_RUNS} pqtimer runs against one target")
        if self.runs:
            time.sleep(self.pause_s)
        self._check_stop()
        if self.pace is not None:
            self.pace.reserve(count + warmup)  # one connection per sample
        self.runs += 1
        proc = self.place.popen(self.argv(groups, count, warmup, via, transport), env=endpoints.get(SCAN_CLIENT, "client").client().env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + (count + warmup) * self.timeout_ms / 1000 + 10
        try:
            while True:  # in short waits, so a stop ends the run at once (a scan's runs take up to seconds each)
                try:
                    out, err = proc.communicate(timeout=max(0.0, min(LOOK_S, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    self._check_stop()
                    if time.monotonic() >= deadline:
                        proc.kill()
                        out, err = proc.communicate()
                        break
        except BaseException:
            registry.kill_child(proc)
            raise
        if proc.returncode == -signal.SIGINT:  # a terminal's Ctrl-C reached pqtimer: no answer of the server's
            raise Stopped("pqtimer was interrupted")
        self._check_stop()
        samples = []
        for line in out.decode(errors="replace").splitlines():
            try:
                samples.append(json.loads(line))
            except ValueError:
                continue
        if not samples:  # pqtimer refused the options (a group list it cannot offer) or died
            why = err.decode(errors="replace").strip()[-300:] or f"exit {proc.returncode}"
            samples = [{"ok": False, "error_class": "pqtimer", "error": why}]
        return samples

    def one(self, groups: str, via: tuple[str, int] | None = None, transport: str = "tcp") -> dict:
        return self.run(groups, via=via, transport=transport)[0]

    def decided(self, groups: str, via: tuple[str, int] | None = None, transport: str = "tcp") -> dict:
        """One sample offering groups, tried again (up to RETRIES times) while the server gave no answer; the
        failures before the last attempt are in the sample's "earlier_failures" (never retried silently)."""
        s, earlier = self.one(groups, via, transport), []
        while not answered(s) and len(earlier) < RETRIES:
            earlier.append(_failed(s))
            s = self.one(groups, via, transport)
        return s | {"earlier_failures": earlier} if earlier else s

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped("the scan was stopped")


def tls_groups() -> tuple[list[catalog.Algorithm], list[catalog.Algorithm]]:
    """The catalog's TLS key exchange groups: those this build can offer, and those it cannot."""
    have, lack = [], []
    for alg in catalog.algorithms("kem"):
        if alg.only_in or not alg.tls:
            continue
        (have if catalog.availability(alg).tls else lack).append(alg)
    return have, lack


def _named(group: str | None, offered: list[str]) -> str | None:
    """The catalog name of a group as pqtimer printed it (OpenSSL spells some in lower case)."""
    if group is None:
        return None
    return next((g for g in offered if g.lower() == group.lower()), group)


def answered(sample: dict) -> bool:
    """Whether a probe's sample is the server's word (a handshake, an alert, a closed or refused connection)."""
    return bool(sample.get("ok")) or _failed(sample)["class"] not in NO_ANSWER


def _failed(sample: dict) -> dict:
    return failure.failure(failure.from_pqtimer(sample.get("error_class"), sample.get("error")) or "tls_error",
                           sample.get("error") or "")


def probe_groups(prober: TlsProber, groups: list[str]) -> dict:
    """Which groups the server accepts, each offered alone with its key share."""
    accepted, rejected, errors, untried, retried = {}, {}, {}, [], {}
    dead = 0
    for k, g in enumerate(groups):
        if dead >= DEAD_AFTER:
            untried = groups[k:]
            break
        s = prober.decided(g)
        if s.get("earlier_failures"):
            retried[g] = s["earlier_failures"]
        if s.get("ok"):
            accepted[g] = s
            dead = 0
            continue
        f = _failed(s)
        if f["class"] in ("refused", "timeout", "unreachable"):
            errors[g] = f
            dead += 1
        elif f["class"] == "pqtimer":
            errors[g] = f
        else:  # the server said no: an alert, an error or a closed connection
            rejected[g] = f
            dead = 0
    return {"accepted": accepted, "rejected": rejected, "errors": errors, "untried": untried, "retried": retried}


def preference(accepted: list[str], choose: Callable[[list[str]], str | None]) -> dict:
    """The server's order among accepted groups. choose(order) offers order (no key share for any of
    them) and returns the group the server asked for, or None. Returns tiers: groups the server ranks
    alike share a tier, in which the client's order decides."""
    remaining = list(accepted)
    tiers: list[list[str]] = []
    while remaining:
        if len(remaining) == 1:
            tiers.append(remaining)
            break
        first = choose(remaining)
        if first not in remaining:
            return {"tiers": tiers, "complete": False, "unranked": remaining,
                    "note": f"the server answered {first or 'with a failure'} when offered {', '.join(remaining)}"}
        again = choose([g for g in remaining if g != first] + [first])
        if again == first:  # its choice whatever the client's order
            tier = [first]
        else:
            tier = [first] + ([again] if again in remaining else [])
            for h in remaining:
                if h not in tier and choose([h] + [g for g in remaining if g != h]) == h:
                    tier.append(h)
            tier = [g for g in remaining if g in tier]
        tiers.append(tier)
        remaining = [g for g in remaining if g not in tier]
    return {"tiers": tiers, "complete": True}


def _decoy(rejected: list[str]) -> str | None:
    """The rejected group with the smallest key share: the one every preference probe sends."""
    if not rejected:
        return None
    return min(rejected, key=lambda g: (catalog.find(g, "kem").pk, rejected.index(g)))


def server_preference(prober: TlsProber, accepted: list[str], rejected: list[str],
                      undecided: list[str] = ()) -> dict:
    """undecided: groups whose acceptance no probe decided (no answer, or not tried): the order found among the
    accepted ones is not the server's order, whatever it holds (a slower machine's scan named an order without
    X25519, which the server prefers)."""
    found = _server_preference(prober, accepted, rejected)
    if not undecided:
        return found
    return found | {"order": None, "complete": False, "undecided": list(undecided),
                    "inconclusive": f"whether the server accepts {', '.join(undecided)} is undecided (no answer): "
                                    "the tiers rank only the groups it accepted"}


def _server_preference(prober: TlsProber, accepted: list[str], rejected: list[str]) -> dict:
    decoy = _decoy(rejected)
    if len(accepted) < 2:
        return {"method": "single group", "decoy": None, "tiers": [accepted] if accepted else [], "complete": True,
                "order": list(accepted), "follows_client": False}
    if decoy is None:
        return {"method": None, "decoy": None, "tiers": [], "complete": False, "order": None, "follows_client": None,
                "note": "not observable this way: the server accepted every group this build has, so there is no "
                        "rejected group whose key share would make it name its favourite; order unknown"}
    probes, unanswered = [], []

    def choose(order: list[str]) -> str | None:
        s = prober.decided(":".join([f"*{decoy}", *order]))
        chosen = _named(s.get("group"), order) if s.get("ok") else None
        probes.append({"offered": order, "chose": chosen, "hrr": s.get("hrr"),
                       **({} if s.get("ok") else {"failure": _failed(s)}),
                       **({"earlier_failures": s["earlier_failures"]} if s.get("earlier_failures") else {})})
        if not answered(s):
            unanswered.append(order)
        return chosen
    p = preference(accepted, choose)
    ties = any(len(t) > 1 for t in p["tiers"])
    order = [t[0] for t in p["tiers"]] if p["complete"] and not ties else None
    note = p.get("note") or ("groups in one tier are equal to the server: it takes the client's order among them"
                             if ties else "")
    # a probe the server never answered decides nothing: the order it was to find is inconclusive, not unknown
    inconclusive = {"inconclusive": f"no answer of the server's to {len(unanswered)} preference probe(s) "
                                    f"after {RETRIES + 1} tries each"} if unanswered and not p["complete"] else {}
    return {"method": "HelloRetryRequest to a rejected key share", "decoy": decoy, **p, "order": order,
            "follows_client": ties, "probes": probes, **({"note": note} if note else {}), **inconclusive}


def hrr_per_share(prober: TlsProber, accepted: list[str]) -> dict:
    """Per accepted group: offered with its key share and the other accepted groups after it, does the
    server ask for another share (a HelloRetryRequest), and which group does it end with."""
    out = {}
    if len(accepted) < 2:
        return out
    for g in accepted:
        others = [h for h in accepted if h != g]
        s = prober.decided(":".join([f"*{g}", *others]))
        out[g] = {"hrr": bool(s.get("hrr")), "chose": _named(s.get("group"), accepted) if s.get("ok") else None,
                  **({} if s.get("ok") else {"failure": _failed(s)})}
    return out


def certificate(sample: dict) -> dict:
    der = list(sample.get("peer_chain") or [])
    signers = list(sample.get("peer_chain_sigs") or [])
    sigalg = sample.get("sigalg")
    chain = [{"der_bytes": d, "signed_with": signers[k] if k < len(signers) else None,
              "signed_with_post_quantum": pq.sig_is_pq(signers[k]) if k < len(signers) else None}
             for k, d in enumerate(der)]
    leaf_pq = pq.sig_is_pq(sigalg)
    signed_pq = [c["signed_with_post_quantum"] for c in chain]
    return {"sigalg": sigalg, "sigalg_post_quantum": leaf_pq, "chain": chain, "count": sample.get("peer_chain_count", len(der)),
            "total_bytes": sum(der), "verify": sample.get("verify"),
            # post-quantum when the handshake's signature and every signature in the chain sent are
            "post_quantum": None if leaf_pq is None else bool(leaf_pq and all(signed_pq))}


def timing(prober: TlsProber, accepted: list[str], n: int) -> dict:
    """Handshake time (before the TCP connect to the client's handshake completion) per accepted group:
    one unrecorded handshake, then n."""
    out = {}
    for g in accepted:
        samples = prober.run(g, count=n, warmup=1)
        ms = [s["t_ns"]["handshake_done"] / 1e6 for s in samples if s.get("ok") and s.get("t_ns", {}).get("handshake_done")]
        fails = [_failed(s) for s in samples if not s.get("ok")]
        row = {"n": n, "ok": len(ms), "failures": len(samples) - len(ms) if samples else n}
        if ms:
            lo, hi = stats.bootstrap_ci(ms, 50)
            row |= {"p50_ms": round(stats.median(ms), 3), "ci95_ms": [round(lo, 3), round(hi, 3)],
                    "min_ms": round(min(ms), 3), "max_ms": round(max(ms), 3)}
        if fails:
            row["failure_classes"] = sorted({f["class"] for f in fails})
        out[g] = row
    return out


def scan(address: Address, place: Place, *, n: int = 10, timeout_s: float = 5.0, cafile: str | None = None,
         servername: str | None = None, pause_s: float = PAUSE_S, groups: list[str] | None = None,
         stop: threading.Event | None = None, pace=None) -> dict:
    """Everything above for one target; never raises for what the server does. groups: only these
    (default: every TLS group this build has). stop: when set, the scan ends with Stopped. pace: a
    pqbench.scan.polite.Pace every connection waits for."""
    have, lack = tls_groups()
    names = [a.name for a in have] if groups is None else list(groups)
    prober = TlsProber(address, place, servername or address.host, cafile, int(timeout_s * 1000), pause_s, stop=stop,
                       pace=pace)
    result = {"protocol": "tls", "target": str(address), "address": address.endpoint,
              "servername": prober.servername, "ca": cafile, "failure": None,
              "not_tried": {a.name: "not in this build" for a in lack} if groups is None else {}}
    if pace is not None:
        pace.reserve(3)
    rtt = connect_rtt(place.socket, address.ip, address.port, n=3,
                      pause_s=max(pause_s, pace.interval) if pace is not None else pause_s)
    result["connect_rtt"] = rtt.to_dict()
    if not rtt.ok:
        result["failure"] = failure.failure(failure.from_connect_errors(rtt.errors),
                                            f"no TCP connection to {address.endpoint}: {', '.join(rtt.errors)}")
        return result
    found = probe_groups(prober, names)
    accepted = list(found["accepted"])
    result["groups"] = {"accepted": accepted, "rejected": found["rejected"], "errors": found["errors"],
                        "untried": found["untried"], **({"retried": found["retried"]} if found["retried"] else {})}
    result["not_tried"] |= {g: "the target stopped answering" for g in found["untried"]}
    if not accepted:
        classes = {f["class"] for f in [*found["errors"].values(), *found["rejected"].values()]}
        cls = next((c for c in ("refused", "timeout", "unreachable", "cert_verify", "alert", "closed", "tls_error")
                    if c in classes), "tls_error")
        result["failure"] = failure.failure(cls, "no TLS 1.3 handshake completed with any group offered")
        return result
    result["preference"] = server_preference(prober, accepted, list(found["rejected"]),
                                             [*found["errors"], *found["untried"]])
    result["hrr"] = hrr_per_share(prober, accepted)
    result["certificate"] = certificate(found["accepted"][accepted[0]])
    tiers = result["preference"].get("tiers") or []
    favourite = tiers[0][0] if tiers else accepted[0]
    result["probes"] = field_probes.run(prober, address, accepted, favourite, found["accepted"][favourite],
                                  result["certificate"]["total_bytes"])
    result["timing"] = timing(prober, accepted, n)
    result["pqtimer_runs"] = prober.runs
    return result
