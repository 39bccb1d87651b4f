"""A scan result as the lines a person reads (the CLI's default output; --json prints the result)."""

from __future__ import annotations

from pqbench import protocol as proto
from pqbench.scan import pq


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return ["  " + line(header), "  " + "-" * len(line(header)), *("  " + line(r) for r in rows)]


def _ms(x) -> str:
    return "–" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _rank(result: dict) -> dict[str, str]:
    """group -> its place in the server's order ("2=" when it shares the place with others)."""
    pref = result.get("preference") or {}
    if pref.get("method") is None and len(result["groups"]["accepted"]) > 1:
        return {}
    out = {}
    for k, tier in enumerate(pref.get("tiers") or [], start=1):
        for g in tier:
            out[g] = f"{k}{'=' if len(tier) > 1 else ''}"
    return out


def tls_lines(r: dict) -> list[str]:
    head = f"{r['target']} (TLS, {r['address']}, server name {r['servername']}): {r['summary']}"
    if not r.get("groups") or not r["groups"]["accepted"]:
        return [head] + _untried(r)
    rank, hrr, timing = _rank(r), r.get("hrr", {}), r.get("timing", {})
    rows = []
    accepted = r["groups"]["accepted"]
    order = sorted(accepted, key=lambda g: (int(rank[g].rstrip("=")) if g in rank else len(accepted), accepted.index(g)))
    for g in order:
        h = hrr.get(g)
        t = timing.get(g, {})
        rows.append([g, "yes" if pq.is_hybrid_mlkem(g) else "", rank.get(g, "?"),
                     "–" if h is None else f"yes, for {h['chose']}" if h["hrr"] else "no",
                     f"{_ms(t.get('p50_ms'))} [{_ms((t.get('ci95_ms') or [None])[0])}, "
                     f"{_ms((t.get('ci95_ms') or [None, None])[1])}]" + (f" ({t['failures']} failed)" if t.get("failures") else "")])
    n = next(iter(timing.values()), {}).get("n", 0)
    lines = [head, *_table(["accepted group", "hybrid ML-KEM", "server's order", "HelloRetryRequest for its share",
                            f"handshake ms, p50 [95% CI], n={n}"], rows)]
    pref = r.get("preference") or {}
    if pref.get("note"):
        lines.append(f"  order: {pref['note']}" + (f" (decoy key share: {pref['decoy']})" if pref.get("decoy") else ""))
    elif pref.get("decoy"):
        lines.append(f"  order: from the HelloRetryRequests to a key share for {pref['decoy']}, a group the server rejects")
    if r.get("pq"):
        lines.append(f"  {r['pq']}")
    if r.get("probes"):
        lines += ["  " + x for x in _table(["probe", "verdict", "detail"],
                                            [[p["probe"], p["verdict"], p.get("detail", "")] for p in r["probes"]])]
    rej = r["groups"]["rejected"]
    if rej:
        reasons = sorted({f["error"].rsplit("::", 1)[-1] for f in rej.values()})
        lines.append(f"  rejected: {len(rej)} groups ({'; '.join(reasons)[:120]})")
    c = r.get("certificate") or {}
    if c:
        sizes = " + ".join(str(x["der_bytes"]) for x in c["chain"])
        signers = ", ".join(x["signed_with"] or "?" for x in c["chain"])
        lines.append(f"  chain: {c['count']} certificate{'s' if c['count'] != 1 else ''}, {sizes} = {c['total_bytes']} B "
                     f"(DER, leaf first), signed with {signers}; handshake signature {c['sigalg']}; "
                     f"verification: {c['verify']}{'' if r.get('ca') else ' (no --ca given)'}")
    return lines + _untried(r)


def _untried(r: dict) -> list[str]:
    by = {}
    for g, why in (r.get("not_tried") or {}).items():
        by.setdefault(why, []).append(g)
    out = [f"  not tried ({why}): {', '.join(gs)}" for why, gs in by.items()]
    errors = (r.get("groups") or {}).get("errors") or {}
    if errors:
        out.append("  failed: " + "; ".join(f"{g}: {f['class']}" for g, f in errors.items()))
    if r.get("failure"):
        out.append(f"  failure: {r['failure']['class']}: {r['failure']['error']}")
    return out


def ssh_lines(r: dict) -> list[str]:
    head = f"{r['target']} (SSH, {r['address']}" + (f", {r['identification']}" if r.get("identification") else "") + \
        f"): {r['summary']}"
    if "kex" not in r:
        return [head, f"  failure: {r['failure']['class']}: {r['failure']['error']}"]
    rows = [[str(i), k, "yes" if pq.ssh_kex_is_pq(k) else "no"] for i, k in enumerate(r["kex"], start=1)]
    lines = [head, *_table(["place", "key exchange (server's order)", "post-quantum"], rows)]
    if r.get("software"):
        lines.append(f"  software: {r['software']}" + (f" ({r['software_comments']})" if r.get("software_comments") else ""))
    lines.append("  host keys: " + ", ".join(f"{h}{' (post-quantum)' if pq.ssh_hostkey_is_pq(h) else ''}"
                                             for h in r["host_key"]))
    lines.append(f"  ciphers: {', '.join(r['ciphers'])}")
    lines.append(f"  MACs: {', '.join(r['macs'])}")
    return lines


# Each scanned protocol's lines (pqbench.scan.SCANNERS).
LINES = {"tls": tls_lines, "ssh": ssh_lines}


def lines(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        out += LINES[r["protocol"]](r) + [""]
    if len(results) > 1:
        out += ["post-quantum readiness:", *_table(["target", "protocol", "summary"],
                                                   [[r["target"], proto.get(r["protocol"]).label, r["summary"]] for r in results])]
    return out
