"""The summary of one cell measured from the CLI (`pqbench handshake`, `pqbench ssh`): DESIGN.md's
`handshake --json` object, from the same cell statistics a run's report uses, and its text form."""

import json
from pathlib import Path

import numpy as np

from pqbench import protocol as proto
from pqbench import transport
from pqbench.analysis import cells as cellstats
from pqbench.analysis.data import cell_data
from pqbench.experiment.cells import Cell
from pqbench.measure.single import RunOptions, cell_of, config_json, measure, one_cell  # noqa: F401  (the API)
from pqbench.sample import END_PHASE


def run(cell: Cell, options: RunOptions, run_dir: Path | None = None, progress=None) -> dict:
    """Measures the cell (single.cell_of's) and returns its summary; result.json beside the samples holds it too."""
    m = measure(cell, options, run_dir, progress)
    result = summarise(cell, options, m.samples, m.record)
    result["config"]["backend"] = m.backend
    result["chain"] = m.chain_json()
    result["run_dir"] = str(m.run_dir)
    (m.run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def interrupted(cell: Cell, options: RunOptions, run_dir: Path) -> dict:
    """The summary of the samples a Ctrl-C'd measurement finished: its client workers wrote them,
    one JSON line each, into the run folder (a line cut short by the interrupt is left out)."""
    samples, files = [], sorted(run_dir.rglob("*-[0-9]*.jsonl"))  # in its lane's folder
    for out in files:
        for line in out.read_text(errors="replace").splitlines():
            try:
                samples.append(json.loads(line))
            except ValueError:
                continue
    result = summarise(cell, options, samples)
    result["config"]["backend"] = options.backend
    result["interrupted"] = True
    result["run_dir"] = str(run_dir)
    result["samples_dir"] = str(files[0].parent if files else run_dir)
    return result


def _round(v, digits=3):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), digits)


def _median_phase(samples: list[dict], phase: str) -> float | None:
    v = [s["t_ns"][phase] / 1e6 for s in samples if s.get("ok") and (s.get("t_ns") or {}).get(phase) is not None]
    return _round(np.median(v)) if v else None


def summarise(cell: Cell, options: RunOptions, samples: list[dict], record: dict | None = None) -> dict:
    """The DESIGN.md `handshake --json` object, from the same cell statistics a run's report uses."""
    record = record or {}
    metric = END_PHASE[cell.mode]
    cd = cell_data({"kex": cell.kex, "sig": cell.sig, "mode": cell.mode}, samples, metric)
    c = cellstats.analyse_cell(cd, {}, resamples=200)
    pct = {f"p{q}_ms": _round(c.pct[q][0]) if c.ok else None for q in cellstats.QS}
    groups, sigalgs = {s.get("group") for s in samples if s.get("ok")}, {s.get("sigalg") for s in samples if s.get("ok")}
    result = {
        "config": config_json(cell, options),
        "summary": {"n": c.n, "ok": c.ok, "failures": c.failures, "failure_classes": c.failure_classes,
                    "metric": metric, "mean_ms": _round(c.mean) if c.ok else None, **pct},
        # Per handshake, per direction, from the client socket's TCP_INFO when the handshake completed.
        "packets": {"client_to_server": c.wire["packets_c2s"], "server_to_client": c.wire["packets_s2c"]},
        "bytes": {"client_to_server": c.wire["bytes_c2s"], "server_to_client": c.wire["bytes_s2c"]},
        "negotiated": {"group": groups.pop() if len(groups) == 1 else sorted(map(str, groups)) or None,
                       "sigalg": sigalgs.pop() if len(sigalgs) == 1 else sorted(map(str, sigalgs)) or None},
        # Median time of each phase since the start (the Sosnowski-style split follows from these).
        "phases_ms": {p: _median_phase(samples, p) for p in proto.get(cell.protocol).phases},
    }
    shape = tls_shape(samples)
    if shape:
        result["tls"] = shape
    for key in ("concurrency", "detector", "wire"):
        if key in record:
            result[key] = record[key]
    if "link_counters" in record:
        result["link"] = record["link_counters"]
    if record.get("path"):
        result["path"] = record["path"]  # a target's: TCP-connect times before and after
    over = transport.get(cell.transport)
    if over.datagram and over.amplification_factor:
        result["quic"] = quic_shape(samples)
    elif over.datagram:
        result["datagrams"] = datagram_shape(samples, cell.protocol)
    elif record.get("cc_client"):
        result["congestion_control"] = {"client": record["cc_client"], "server": record["cc_server"]}
    return result


def quic_shape(samples: list[dict]) -> dict:
    """Over QUIC, per successful sample: the datagrams each way and whether the server stalled at the
    amplification limit (the emulator's record), and what the client saw of Retry and its Initial size."""
    ok = [s for s in samples if s.get("ok")]
    wire = [s["wire"] for s in ok if s.get("wire")]
    med = lambda values: _round(np.median(values), 3) if values else None  # noqa: E731
    return {"n": len(ok), "datagrams_c2s": med([w["datagrams_c2s"] for w in wire if w.get("datagrams_c2s") is not None]),
            "datagrams_s2c": med([w["datagrams_s2c"] for w in wire if w.get("datagrams_s2c") is not None]),
            "stalled": sum(1 for w in wire if w.get("stalls")), "recorded": len(wire),
            "stall_ms": med([w["stall_ms"] for w in wire if w.get("stall_ms") is not None]),
            "retry": sum(1 for s in ok if (s.get("quic") or {}).get("retry")),
            "initial_size": med([s["quic"]["initial_size"] for s in ok if (s.get("quic") or {}).get("initial_size")])}


def datagram_shape(samples: list[dict], protocol: str) -> dict:
    """Over plain datagrams (DTLS, IKEv2), per successful sample: the datagrams each way on the wire, and what the
    client counted in its `protocol` section (`own`): the median of each count (DTLS: its ClientHellos, two after a
    cookie, and their datagrams; IKEv2: datagrams, retransmissions, IKE_INTERMEDIATE exchanges), for each flag the
    samples that had it (DTLS: a cookie asked)."""
    ok = [s for s in samples if s.get("ok")]
    wire = [s["wire"] for s in ok if s.get("wire")]
    own = [s[protocol] for s in ok if isinstance(s.get(protocol), dict)]
    med = lambda values: _round(np.median(values), 3) if values else None  # noqa: E731
    counted = {}
    for key in dict.fromkeys(k for o in own for k, v in o.items() if isinstance(v, (int, float))):
        values = [o[key] for o in own if isinstance(o.get(key), (int, float))]
        counted[key] = sum(values) if all(isinstance(v, bool) for v in values) else med(values)
    return {"n": len(ok), "recorded": len(wire),
            "datagrams_c2s": med([w["datagrams_c2s"] for w in wire if w.get("datagrams_c2s") is not None]),
            "datagrams_s2c": med([w["datagrams_s2c"] for w in wire if w.get("datagrams_s2c") is not None]),
            "own": counted}


def tls_shape(samples: list[dict]) -> dict | None:
    """What pqtimer records of the handshake's shape, over the successful samples: HelloRetryRequests, the
    ClientHellos' sizes and key shares (medians; the second after an HRR), the compressed certificate, early
    data and the first response byte. None for a client that records none of it."""
    ok = [s for s in samples if s.get("ok") and "client_hellos" in s]
    if not ok:
        return None

    def med(values):
        values = [v for v in values if v is not None]
        return _round(np.median(values), 1) if values else None

    hellos = [s["client_hellos"] for s in ok]
    first = [h[0] for h in hellos if h]
    shape = {"n": len(ok), "hrr": sum(1 for s in ok if s.get("hrr")),
             "client_hello_bytes": med(h["bytes"] for h in first),
             "client_hello2_bytes": med(h[1]["bytes"] for h in hellos if len(h) > 1),
             "key_shares": sorted({tuple(k["group"] for k in h["key_shares"]) for h in first}),
             "hrr_ms": med((s["t_ns"].get("server_hello_received") or 0) / 1e6 - s["hrr_received_ns"] / 1e6
                           for s in ok if s.get("hrr_received_ns") is not None),
             "first_byte_ms": _median_phase(ok, "first_byte")}
    shape["key_shares"] = [list(k) for k in shape["key_shares"]]
    comp = [s["cert_compression"] for s in ok if s.get("cert_compression")]
    plain = [(s.get("msg_bytes_received") or {}).get("certificate") for s in ok if not s.get("cert_compression")]
    shape["certificate"] = {
        "compressed": len(comp), "algorithm": sorted({c["algorithm"] for c in comp}) or None,
        "compressed_bytes": med(c["compressed_bytes"] for c in comp),
        "uncompressed_bytes": med([c["certificate_bytes"] for c in comp] + plain),
        "verified": sum(1 for s in ok if s.get("verify") == "ok")}
    early = [s.get("early_data") for s in ok if s.get("early_data")]
    if early:
        shape["early_data"] = {k: early.count(k) for k in ("accepted", "rejected", "not_sent")}
    return shape


def format_summary(result: dict) -> str:
    s, c = result["summary"], result["config"]
    lines = [f"{c['kex']} + {c['sig']}, server {c['server']}, client {c['client']}, over {c['backend']}: {s['n']} samples, "
             f"{s['failures']} failed" + (f" {s['failure_classes']}" if s["failures"] else ""),
             f"  {s['metric']} ms: mean {s['mean_ms']}  p5 {s['p5_ms']}  p25 {s['p25_ms']}  p50 {s['p50_ms']}  "
             f"p75 {s['p75_ms']}  p95 {s['p95_ms']}  p99 {s['p99_ms']}",
             f"  per handshake (median): packets c→s {result['packets']['client_to_server']} "
             f"s→c {result['packets']['server_to_client']}; bytes c→s {result['bytes']['client_to_server']} "
             f"s→c {result['bytes']['server_to_client']}",
             f"  negotiated: group {result['negotiated']['group']}, "
             + (f"signature {result['negotiated']['sigalg']}" if result["negotiated"]["sigalg"] is not None
                else "no signature (resumed: the PSK stands for the certificate)"
                if c.get("mode") in ("resume", "resume_page", "early")
                else "no signature")]
    t = result.get("tls")
    if t:
        line = f"  ClientHello {t['client_hello_bytes']} bytes (key shares {', '.join('+'.join(k) for k in t['key_shares'])})"
        if t["hrr"]:
            line += (f"; HelloRetryRequest in {t['hrr']} of {t['n']}, second ClientHello {t['client_hello2_bytes']} "
                     f"bytes, {t['hrr_ms']} ms from the HRR to the ServerHello")
        lines.append(line)
        cert = t["certificate"]
        if cert["compressed"]:
            lines.append(f"  certificate compressed ({', '.join(cert['algorithm'])}) in {cert['compressed']} of {t['n']}: "
                         f"{cert['compressed_bytes']} bytes for {cert['uncompressed_bytes']}; verified in {cert['verified']}")
        if t.get("early_data"):
            e = t["early_data"]
            lines.append(f"  early data accepted in {e['accepted']} of {t['n']} (rejected {e['rejected']}); "
                         f"first response byte {t['first_byte_ms']} ms")
    q = result.get("quic")
    if q:
        lines.append(f"  QUIC: Initial {q['initial_size']} bytes, datagrams c→s {q['datagrams_c2s']} s→c {q['datagrams_s2c']}; "
                     f"server stalled at the 3× amplification limit in {q['stalled']} of {q['recorded']}"
                     + (f" ({q['stall_ms']} ms)" if q["stall_ms"] is not None else "")
                     + (f"; Retry in {q['retry']} of {q['n']}" if q["retry"] else ""))
    d = result.get("datagrams")
    if d:
        own = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in d["own"].items())
        lines.append(f"  datagrams on the wire c→s {d['datagrams_c2s']} s→c {d['datagrams_s2c']}; "
                     f"{proto.get(c.get('protocol')).label} client (medians; flags: samples of {d['n']}): {own}")
    cc = result.get("congestion_control")
    if cc:
        lines.append(f"  TCP congestion control: client {cc['client']}, server {cc['server']}")
    so = (result.get("chain") or {}).get("size_only")
    if so:
        lines.append(f"  size-only host key: {so['bytes']} bytes on the wire like {so['stands_for']}'s key + signature; "
                     "the computation is ed25519's")
    w = result.get("wire") or {}
    if w.get("n"):
        lines.append(f"  client vs wire time: median {w['median_diff_ms']:+.3f} ms "
                     f"(p5 {w['p5_diff_ms']:+.3f}, p95 {w['p95_diff_ms']:+.3f}; {w['disagree']} of {w['n']} "
                     f"beyond ±{w['tolerance_ms']} ms)")
    d = result.get("detector") or {}
    if d.get("late") is not None:
        lines.append(f"  late samples (no retransmission, beyond {d['threshold_ms']} ms): {d['late']} of {d['untouched']}")
    if result.get("interrupted"):
        lines.insert(0, f"interrupted: the {s['n']} samples finished so far")
        lines.append(f"  raw samples: {result['samples_dir']} (one JSON line per sample in each *.jsonl)")
    elif result.get("run_dir"):
        lines.append(f"  raw samples: {result['run_dir']}/samples.jsonl")
    else:
        lines.append("  run folder removed (no sample failed); --keep keeps the raw samples, server config and logs")
    return "\n".join(lines)
