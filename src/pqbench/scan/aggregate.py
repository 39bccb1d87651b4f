"""A population's results summed up as published scans report them: shares of servers (of those that
answered) accepting a hybrid post-quantum key exchange, choosing it by default, needing a
HelloRetryRequest for a client predicting X25519, with a post-quantum certificate, whose first flight
overflows TCP's initial window, intolerant of a split or an oversized ClientHello; SSH servers
offering a post-quantum key exchange, overall and by software version."""

from __future__ import annotations

from collections import Counter, defaultdict

from pqbench.scan.probes import TCP_IW_BYTES

# published figures to compare with (the references)
PUBLISHED = {"tls_hybrid_pq": ("a 2026 scan of 32,011 domains", 49.3), "tls_pq_certificate": ("the same scan", 0.0),
             "ssh_pq": ("published SSH scans", 6.0)}


def _share(n: int, of: int) -> dict:
    return {"n": n, "of": of, "percent": round(100 * n / of, 1) if of else None}


def _probe(r: dict, name: str) -> dict:
    return next((p for p in r.get("probes") or [] if p["probe"] == name), {})


def aggregate(results: list[dict]) -> dict:
    by_protocol: dict[str, list[dict]] = {}
    for r in results:
        by_protocol.setdefault(r.get("protocol"), []).append(r)
    tls, ssh = by_protocol.get("tls", []), by_protocol.get("ssh", [])
    tls_ok = [r for r in tls if (r.get("groups") or {}).get("accepted")]
    ssh_ok = [r for r in ssh if "kex" in r]
    rd = lambda r: r.get("readiness") or {}  # noqa: E731
    split = [_probe(r, "split ClientHello").get("verdict") for r in tls_ok]
    over = [_probe(r, "oversized ClientHello").get("verdict") for r in tls_ok]
    chains = sorted(((r.get("certificate") or {}).get("total_bytes") or 0) for r in tls_ok)
    flight = [_probe(r, "first flight vs TCP initial window") for r in tls_ok]
    by_version = defaultdict(lambda: [0, 0])
    for r in ssh_ok:
        v = by_version[r.get("software") or "unknown"]
        v[0] += 1
        v[1] += bool(r.get("kex_post_quantum"))
    answered = {id(r) for r in tls_ok + ssh_ok}
    return {
        "targets": len(results), "failures": Counter((r.get("failure") or {}).get("class") for r in results
                                                   if r.get("failure") and id(r) not in answered),
        "tls": {"targets": len(tls), "answered": len(tls_ok),
                "hybrid_pq_accepted": _share(sum(bool(rd(r).get("hybrid_mlkem_accepted")) for r in tls_ok), len(tls_ok)),
                "pq_accepted": _share(sum(bool(rd(r).get("post_quantum_accepted")) for r in tls_ok), len(tls_ok)),
                "pq_by_default": _share(sum(rd(r).get("pq_key_exchange") == "by default" for r in tls_ok), len(tls_ok)),
                "hrr_for_x25519": _share(sum(bool((rd(r).get("hrr_for_x25519") or {}).get("needed")) for r in tls_ok),
                                         len(tls_ok)),
                "pq_certificate": _share(sum(rd(r).get("pq_authentication") is True for r in tls_ok), len(tls_ok)),
                "flight_over_initial_window": _share(sum(p.get("verdict", "fits") != "fits" for p in flight), len(tls_ok)),
                "chain_bytes": {"min": chains[0] if chains else None, "median": chains[len(chains) // 2] if chains else None,
                                "max": chains[-1] if chains else None, "initial_window_bytes": TCP_IW_BYTES},
                "split_intolerant": _share(sum(v in ("reset", "silent", "closed") for v in split), len(tls_ok)),
                "oversized_intolerant": _share(sum(v in ("reset", "silent", "closed") for v in over), len(tls_ok)),
                "split_verdicts": dict(Counter(split)), "oversized_verdicts": dict(Counter(over))},
        "ssh": {"targets": len(ssh), "answered": len(ssh_ok),
                "pq_offered": _share(sum(bool(r.get("kex_post_quantum")) for r in ssh_ok), len(ssh_ok)),
                "pq_first": _share(sum(bool(rd(r).get("kex_first_post_quantum")) for r in ssh_ok), len(ssh_ok)),
                "by_version": {v: _share(pq, n) for v, (n, pq) in sorted(by_version.items())}},
    }


def lines(agg: dict) -> list[str]:
    def pct(s: dict) -> str:
        return "–" if s["percent"] is None else f"{s['percent']:.1f} % ({s['n']} of {s['of']})"
    t, s = agg["tls"], agg["ssh"]
    out = [f"population: {agg['targets']} targets; TLS {t['answered']} of {t['targets']} answered, SSH {s['answered']} "
           f"of {s['targets']}" + (f"; no answer: {', '.join(f'{k} {v}' for k, v in sorted(agg['failures'].items()))}"
                                    if agg["failures"] else "")]
    rows = [("TLS: accept a hybrid post-quantum key exchange", t["hybrid_pq_accepted"], "tls_hybrid_pq"),
            ("TLS: accept any post-quantum key exchange", t["pq_accepted"], None),
            ("TLS: post-quantum by default", t["pq_by_default"], None),
            ("TLS: HelloRetryRequest for a client predicting X25519", t["hrr_for_x25519"], None),
            ("TLS: post-quantum certificate", t["pq_certificate"], "tls_pq_certificate"),
            (f"TLS: first flight over TCP's initial window ({TCP_IW_BYTES} B)", t["flight_over_initial_window"], None),
            ("TLS: intolerant of a split ClientHello", t["split_intolerant"], None),
            ("TLS: intolerant of an oversized ClientHello", t["oversized_intolerant"], None),
            ("SSH: offer a post-quantum key exchange", s["pq_offered"], "ssh_pq"),
            ("SSH: post-quantum key exchange first", s["pq_first"], None)]
    width = max(len(r[0]) for r in rows)
    for name, share, ref in rows:
        published = f"   (published: {PUBLISHED[ref][1]:g} %, {PUBLISHED[ref][0]})" if ref else ""
        out.append(f"  {name.ljust(width)}  {pct(share)}{published}")
    c = t["chain_bytes"]
    if c["median"] is not None:
        out.append(f"  TLS chain bytes: min {c['min']}, median {c['median']}, max {c['max']}")
    for v, share in s["by_version"].items():
        out.append(f"  SSH {v}: post-quantum key exchange offered by {pct(share)}")
    return out
