"""`pqbench report`: a run's statistics and figures as report.html (self-contained) and summary.md.

    out/report.html     figures embedded as base64 PNG, every table, provenance, calibration, spec
    out/summary.md      the same text and tables in Markdown
    out/figures/*.png   the figures, linked from summary.md
"""

from __future__ import annotations

import io
from pathlib import Path

from pqbench import analysis as analysis_mod
from pqbench.report import html, markdown, plots, sections, tables
from pqbench.report.sections import Section
# Each capability's section (pqbench.report.sections), registered by its module: one line each.
import pqbench.report.load  # noqa: F401  servers' capacity
import pqbench.report.targets  # noqa: F401  servers pqbench did not start
import pqbench.report.deployment  # noqa: F401  offers, certificate compression, 0-RTT
import pqbench.report.links  # noqa: F401  users' links, queues
import pqbench.report.transports  # noqa: F401  QUIC beside TCP
import pqbench.report.datagrams  # noqa: F401  DTLS and IKEv2 under loss, in timers
import pqbench.report.chains  # noqa: F401  chain shapes, the byte staircase
import pqbench.report.browsers  # noqa: F401  real browsers
import pqbench.report.page_clients  # noqa: F401  page loads by client
import pqbench.report.nodes  # noqa: F401  a cluster's nodes
import pqbench.report.scans  # noqa: F401  scans in the field

CAPTIONS = {
    "handshake-vs-loss": "One panel per RTT (and per other link setting that varies). Solid: median; dashed: p95; "
                         "bands: 95 % bootstrap confidence intervals; one colour per algorithm.",
    "modes": "Share of successful handshakes in each mode, per algorithm: solid, no retransmission; dotted, "
             "recovered by a fast retransmission; dashed, recovered after a retransmission timeout (200 ms or more "
             "over the clean time). A p95 that sits between modes has a wide CI at any sample count; these shares "
             "are what is stable. Retransmissions from the client's TCP_INFO and the emulator's record.",
    "handshake": "The run has one loss rate: median (filled) and p95 (open) per algorithm with 95 % bootstrap CIs, "
                 "one panel per link condition.",
    "scenarios": "Named link conditions of the published studies; bars are medians with 95 % CIs, dashed ticks p95.",
    "wire": "Median TCP payload bytes (TLS records) and segments per handshake in each direction at 0 % loss, "
            "from the client's TCP_INFO when the handshake completed (segments include the SYN and pure ACKs).",
    "pages": "Time from before TCP connect to the last byte of a page of each size.",
    "requests": "N GET requests on one connection: the total, and the median divided by N (the handshake's cost "
                "amortised over the requests).",
    "cdf": "Empirical CDF of the cell's time, one panel per link condition.",
    "phases": "Medians of the connection's phases at each RTT's lowest loss: TCP handshake, ClientHello preparation "
              "(client key generation), ClientHello→ServerHello (1 RTT + server key exchange), ServerHello→server "
              "Finished (certificate chain transfer + server signature), then client verification. SSH cells: TCP handshake, "
              "the server's identification, the KEXINIT exchange, key exchange init→reply (1 RTT + the server's key "
              "exchange and host key signature, the host key flight), reply→client NEWKEYS (client verification).",
    "model": "Stacked bars: the lower bound (round trips, serialisation at the link rate, slow-start rounds, crypto "
             "on the critical path); dots: the measured median with p25–p75, at the lowest loss of each condition.",
    "failures": "Share of failed samples (timeouts, resets …) with Wilson 95 % intervals.",
    "load-latency": "Each step offers a rate of Poisson arrivals for its duration; latency is from an arrival's scheduled "
                    "time to the handshake's end, so a generator or server that falls behind shows it. The last point "
                    "of each line is the step at which the server (or the generator) saturated.",
    "load-capacity": "The highest achieved rate of each load cell. Solid: the server saturated; hatched: the load "
                     "generator saturated first, so the server's capacity is at least this.",
    "targets": "Servers pqbench did not start, over the host's network: each point is one target and algorithm, at the "
               "path RTT measured by TCP connects before and after its cell. The dotted line is two round trips "
               "(TCP, then TLS 1.3): what is above it is the handshake's own cost (bytes, crypto, server).",
}


# The cells' own tables and figures, and the run's provenance, around the capabilities' sections.
sections.register(Section("cells", 50, lambda con, run_id, a: [
    tables.paired(a), tables.protocols(a), tables.stacks(a), tables.cells(a), tables.quality(a), tables.notes(a),
    tables.wire(a), tables.model(a), tables.not_run(a), tables.crypto(a)],
    lambda con, run_id: plots.FIGURES, captions=CAPTIONS))
sections.register(Section("provenance", 70, lambda con, run_id, a: [tables.calibration(a), tables.provenance(a)]))

# Figures that only some runs have, and why a run lacks them (the others always appear, or stand in
# for each other: loss curves vs per-algorithm points).
ABSENT = {"modes": "one loss rate", "scenarios": "no named scenarios", "pages": "no page cells", "requests": "no request cells",
          "failures": "no sample failed"}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def build(con, run_id: str, out: Path, *, resamples: int = 1000, by_node: bool = False) -> dict:
    """Writes the report of run_id into out; returns the paths written and what it contains. by_node: also one
    report per node that measured the run, under out/nodes/NODE (each with that node's cells only)."""
    data = analysis_mod.read(con, run_id)
    result = _write(con, run_id, analysis_mod.analyse_data(data, resamples=resamples), Path(out))
    if by_node:
        result["nodes"] = {node: _write(con, run_id, analysis_mod.analyse_data(data.of_node(node), resamples=resamples),
                                        Path(out) / "nodes" / node)["html"]
                           for node in dict.fromkeys(n["node"] for n in data.nodes)}
    return result


def _write(con, run_id: str, a, out: Path) -> dict:
    (out / "figures").mkdir(parents=True, exist_ok=True)
    rendered = []
    for fid, title, fig in plots.render_all(a, sections.figures(con, run_id)):
        png = _png(fig)
        (out / "figures" / f"{fid}.png").write_bytes(png)
        rendered.append((fid, title, png, sections.caption(fid)))
    present = {r[0] for r in rendered}
    absent = [f"{title} ({ABSENT[fid]})" for fid, title, _ in plots.FIGURES if fid not in present and fid in ABSENT]
    title = f"pqbench report: {a.run.get('name') or run_id}"
    summary = tables.summary(a)
    warnings = tables.warnings(a)
    body = sections.tables(con, run_id, a)
    (out / "report.html").write_text(html.page(title, summary, warnings, rendered, absent, body,
                                               a.run.get("spec_toml")))
    md_figs = [(fid, t, f"figures/{fid}.png", cap) for fid, t, _, cap in rendered]
    (out / "summary.md").write_text(markdown.page(title, summary, warnings, md_figs, absent, body))
    return {"run": run_id, "html": str(out / "report.html"), "markdown": str(out / "summary.md"),
            "figures": [r[0] for r in rendered], "absent": absent, "warnings": len(warnings),
            "cells": len(a.cells), "not_run": len(a.not_run)}
