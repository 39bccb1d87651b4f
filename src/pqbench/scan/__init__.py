"""`pqbench scan`: what a server pqbench did not start negotiates, and how ready for post-quantum
cryptography it is. `tls` asks a TLS server with pqtimer, `ssh` reads an SSH server's KEXINIT; this
module runs either for one address and sums the result up in one line (`readiness`, `summary`).

    result = scan(address.parse("target", "example.org:443"), place, n=10)
    print(result["summary"])
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from pqbench.endpoints.base import Place
from pqbench.remote.address import Address
from pqbench.scan import pq, ssh, tls


Stopped = tls.Stopped


def scan(address: Address, place: Place, *, n: int = 10, timeout_s: float = 5.0, cafile: str | None = None,
         servername: str | None = None, pause_s: float = tls.PAUSE_S, stop=None, pace=None,
         groups: list[str] | None = None) -> dict:
    """One target, from place (the client side of a path). Never raises for what the server does: a
    failure is in result["failure"] ({"class", "error"}). stop (a threading.Event): once set, a scan in
    progress raises Stopped instead of returning what it found so far (Ctrl-C). pace: a
    pqbench.scan.polite.Pace every connection waits for (a population scan's global rate). groups: the TLS
    groups tried (default: every one this build has)."""
    if stop is not None and stop.is_set():
        raise Stopped("the scan was stopped")
    result = SCANNERS[address.protocol].scan(address, place, n=n, timeout_s=timeout_s, cafile=cafile,
                                             servername=servername, pause_s=pause_s, stop=stop, pace=pace,
                                             groups=groups)
    result["readiness"] = readiness(result)
    result["summary"] = summary(result)
    if explicit(result):
        result["pq"] = explicit(result)
    return result


def readiness(result: dict) -> dict:
    if result.get("failure") and not result.get("groups", {}).get("accepted") and "kex" not in result:
        return {}
    return SCANNERS[result["protocol"]].readiness(result)


def _ssh_readiness(result: dict) -> dict:
    kex = result.get("kex", [])
    return {"mlkem768x25519_sha256": pq.SSH_HYBRID_MLKEM in kex,
            "sntrup761x25519_sha512": any(k in kex for k in pq.SSH_SNTRUP),
            "kex_post_quantum": result.get("kex_post_quantum", []),
            "kex_first_post_quantum": bool(kex) and pq.ssh_kex_is_pq(kex[0]),
            "host_key_post_quantum": result.get("host_key_post_quantum", [])}


def _tls_readiness(result: dict) -> dict:
    accepted = result["groups"]["accepted"]
    hybrids = [g for g in accepted if pq.is_hybrid_mlkem(g)]
    pref = result.get("preference", {})
    # with a group's acceptance undecided, the first tier may not be the server's first choice: no verdict on it
    tiers = [] if pref.get("undecided") else pref.get("tiers") or []
    if not hybrids:
        preferred = False
    elif not tiers or (pref.get("method") is None):
        preferred = None  # order unknown
    elif any(pq.is_hybrid_mlkem(g) for g in tiers[0]):
        preferred = True if len(tiers[0]) == 1 else "client's order"
    else:
        preferred = False
    cert = result.get("certificate", {})
    pq_groups = [g for g in accepted if _kem_pq(g)]
    # post-quantum groups whose ClientHello met a reset or silence instead of the server's alert: something on
    # the path (an ossified middlebox, tests/test_scan_probes.py) may have stopped it
    failed = {**result["groups"].get("rejected", {}), **result["groups"].get("errors", {})}
    blocked = [g for g, f in failed.items() if _kem_pq(g) and (f["class"] == "timeout" or "reset" in f["error"].lower())]
    hrr = next((p for p in result.get("probes", []) if p["probe"].startswith("HelloRetryRequest")), {})
    return {"hybrid_mlkem_accepted": hybrids, "hybrid_mlkem_preferred": preferred,
            "post_quantum_accepted": pq_groups,
            "chain_post_quantum": cert.get("post_quantum"), "sigalg": cert.get("sigalg"),
            # the explicit answers: does a client that offers post-quantum and classical get post-quantum
            "pq_key_exchange": pq_kex(pq_groups, tiers, pref.get("method") is not None or len(accepted) < 2,
                                      pref.get("inconclusive"))
            if pq_groups or not blocked else "unknown: reset or silence on the path",
            "pq_blocked": blocked,
            "pq_authentication": cert.get("post_quantum"),
            "hrr_for_x25519": {"needed": hrr["verdict"] == "needed", "group": hrr.get("group")}
            if hrr.get("verdict") in ("needed", "not needed") else None}


def pq_kex(pq_groups: list[str], tiers: list[list[str]], order_known: bool, inconclusive: str | None = None) -> str:
    """"by default" (the server's first choice is post-quantum), "when the client lists it first" (its
    first choice ties with a classical group), "only when asked" (accepted, but a classical group is
    preferred), "no", "accepted, preference unknown" (the server's order is not observable), or
    "inconclusive: ..." (the probes that would have found its first choice got no answer)."""
    if not pq_groups:
        return "no"
    if inconclusive and not tiers:
        return f"inconclusive: {inconclusive}"
    if not order_known or not tiers:
        return "accepted, preference unknown"
    top = tiers[0]
    if all(g in pq_groups for g in top):
        return "by default"
    if any(g in pq_groups for g in top):
        return "when the client lists it first"
    return "only when asked"


def _kem_pq(group: str) -> bool:
    from pqbench.algorithms import catalog
    from pqbench.errors import BadInput
    try:
        return pq.kem_is_pq(catalog.find(group, "kem"))
    except BadInput:  # a group the catalog does not know
        return False


def summary(result: dict) -> str:
    """The post-quantum readiness line."""
    f = result.get("failure")
    r = result.get("readiness") or readiness(result)
    if f and not r:
        return f"no answer: {f['class']} ({f['error']})"
    return SCANNERS[result["protocol"]].summary(r)


def _ssh_summary(r: dict) -> str:
    offered = [name for name, key in ((pq.SSH_HYBRID_MLKEM, "mlkem768x25519_sha256"),
                                      ("sntrup761x25519-sha512", "sntrup761x25519_sha512")) if r[key]]
    kex = (f"post-quantum key exchange offered: {', '.join(offered)}" if offered else
           "no post-quantum key exchange offered" if not r["kex_post_quantum"] else
           f"post-quantum key exchange offered: {', '.join(r['kex_post_quantum'])}")
    first = "; first choice post-quantum" if r["kex_first_post_quantum"] else ""
    hk = (f"post-quantum host keys: {', '.join(r['host_key_post_quantum'])}" if r["host_key_post_quantum"]
          else "host keys classical")
    return f"{kex}{first}; {hk}"


def _tls_summary(r: dict) -> str:
    h = r["hybrid_mlkem_accepted"]
    pref = {True: ", preferred", False: ", not preferred", None: " (preference unknown)",
            "client's order": ", preferred as much as a classical group (the client's order decides)"}[r["hybrid_mlkem_preferred"]]
    kex = f"hybrid ML-KEM accepted ({', '.join(h)}){pref}" if h else \
        ("no hybrid ML-KEM; other post-quantum groups: " + ", ".join(r["post_quantum_accepted"])
         if r["post_quantum_accepted"] else "no post-quantum key exchange accepted")
    chain = {True: "chain post-quantum", False: "chain not post-quantum", None: "chain unknown"}[r["chain_post_quantum"]]
    return f"{kex}; {chain} ({r['sigalg'] or 'no signature'})"


def explicit(result: dict) -> str | None:
    """The three answers a user asks first, in one line (TLS: where the readiness has them)."""
    r = result.get("readiness") or {}
    if "pq_key_exchange" not in r:
        return None
    kex = r["pq_key_exchange"]
    kex = f"yes, {kex}" if kex in ("by default", "when the client lists it first", "only when asked") else kex
    if r.get("pq_blocked") and not r["post_quantum_accepted"]:
        kex += f" ({', '.join(r['pq_blocked'])} met a reset or silence, not the server's alert)"
    auth = {True: "yes", False: "no", None: "unknown"}[r["pq_authentication"]]
    h = r["hrr_for_x25519"]
    hrr = "unknown" if h is None else f"needed (for {h['group']})" if h["needed"] else "not needed"
    return f"post-quantum key exchange: {kex}; post-quantum authentication: {auth}; " \
           f"HelloRetryRequest for a client predicting X25519: {hrr}"


@dataclasses.dataclass(frozen=True)
class Scanner:
    """How pqbench scans a protocol's servers: scan (address, place, **the options of `scan` above) -> result;
    readiness (result) -> its verdicts; summary (readiness) -> the line."""
    scan: Callable[..., dict]
    readiness: Callable[[dict], dict]
    summary: Callable[[dict], str]


def _ssh_scan(address: Address, place: Place, *, timeout_s: float, pace, **_tls_options) -> dict:
    return ssh.scan(address, place, timeout_s=timeout_s, pace=pace)  # one connection, within timeout_s


# Each protocol pqbench scans, by name (pqbench.protocol).
SCANNERS = {"tls": Scanner(tls.scan, _tls_readiness, _tls_summary),
            "ssh": Scanner(_ssh_scan, _ssh_readiness, _ssh_summary)}
