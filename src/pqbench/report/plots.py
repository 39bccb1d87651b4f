"""The report's figures (matplotlib, no pyplot state): each function takes an Analysis and returns a
Figure, or None when the run has nothing for it (a handshake-only run has no page figure).

One colour per algorithm across every figure; medians solid, p95 dashed, 95 % CIs as bands.
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pqbench.analysis import Analysis, CellStats, page_bytes
from pqbench import protocol as proto
from pqbench.experiment.condition import condition
from pqbench.report import load as loadreport
from pqbench.report import targets

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")
MAX_PANELS = 12
MAX_ROWS = 40  # rows of per-cell bar charts
HANDSHAKE_MODES = ("handshake", "resume")
PANEL_FIELDS = ("rtt_ms", "rate_mbit", "mtu", "initcwnd", "congctl", "loss_model", "mode", "pad")


def colours(a: Analysis) -> dict:
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(a.labels())}


def _grid(n: int, width: float = 4.2, height: float = 3.3, max_cols: int = 3):
    if n < 1:
        raise ValueError("a figure needs at least one panel")  # callers return None instead
    cols = min(n, max_cols) if n != 4 else min(2, max_cols)  # 2 x 2 rather than 3 + 1
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(max(6.4, width * cols + 0.6), height * rows + 0.8), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


TITLE_FORMATS = {"rtt_ms": lambda v: f"RTT {v:g} ms", "rate_mbit": lambda v: f"{v:g} Mbit/s",
                 "mtu": lambda v: f"MTU {v}", "initcwnd": lambda v: f"initcwnd {v}", "congctl": str,
                 "loss": lambda v: f"loss {100 * v:g} %", "pad": lambda v: f"pad {v}", "page": lambda v: f"page {v}",
                 "requests": lambda v: f"{v} requests", "scenario": str, "mode": str}


def _panel_title(key: dict) -> str:
    parts = []
    for f, v in key.items():
        if v is None or (f == "mode" and v == "handshake") or (f == "loss_model" and v in ("bernoulli", "none")):
            continue
        fmt = TITLE_FORMATS.get(f)
        parts.append(fmt(v) if fmt else f"{f} {v}")
    return ", ".join(parts) or "all cells"


def _groups(cells: list[CellStats], fields: tuple) -> list[tuple[dict, list[CellStats]]]:
    """Cells grouped by the values of fields, groups in ascending order of those values."""
    out: dict[tuple, list] = {}
    for c in cells:
        out.setdefault(tuple(c.row.get(f) for f in fields), []).append(c)
    def sort_key(k):  # None last; pages by size, not by name ("100k" after "1k")
        return tuple((v is None, page_bytes(v) if f == "page" and v else v if v is not None else 0)
                     for f, v in zip(fields, k))
    order = sorted(out, key=sort_key)
    return [(dict(zip(fields, k)), out[k]) for k in order]


def _panel_fields(a: Analysis, extra: tuple = ()) -> tuple:
    """Condition fields that vary (beyond the x axis) and so need a panel each; RTT always does."""
    fields = tuple(f for f in PANEL_FIELDS + extra if f not in a.variant_fields)
    return tuple(f for f in fields if f == "rtt_ms" or len({c.row.get(f) for c in a.cells}) > 1)


def _log_x_ticks(ax, xs, fmt="{:g}") -> None:
    """Log x axis labelled at the measured values (few values: matplotlib's 2×10^0 ticks read badly)."""
    xs = sorted(set(xs))
    ax.set_xscale("log")
    ax.set_xticks(xs, [fmt.format(x) for x in xs])
    ax.minorticks_off()


def _log_if_wide(ax, values) -> None:
    v = [x for x in values if x and x > 0 and math.isfinite(x)]
    if v and max(v) / min(v) > 8:  # loss tails (RTOs of 200 ms-1 s) would squash the medians
        ax.set_yscale("log")


def _legend(fig: Figure, cols: dict, used: list[str], extra: list | None = None) -> None:
    handles = [Line2D([], [], color=cols[l], lw=2, label=l) for l in used]
    handles += extra or []
    fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)), frameon=False,
               fontsize="small")


STYLE_HANDLES = [Line2D([], [], color="0.3", lw=2, ls="-", label="median (p50)"),
                 Line2D([], [], color="0.3", lw=1.4, ls="--", label="p95")]


def _curves(ax, xs, cells, colour, log_y_values: list) -> None:
    """Median (solid) and p95 (dashed) against xs, with their CI bands."""
    for q, ls, lw, alpha in ((50, "-", 2, 0.25), (95, "--", 1.4, 0.08)):
        est = [c.pct[q][0] for c in cells]
        lo = [c.pct[q][1] for c in cells]
        hi = [c.pct[q][2] for c in cells]
        ax.plot(xs, est, ls=ls, lw=lw, color=colour, marker="o" if q == 50 else None, ms=3.5)
        ax.fill_between(xs, lo, hi, color=colour, alpha=alpha, lw=0)
        log_y_values += est + lo + hi


def _timed(a: Analysis) -> list[CellStats]:
    """Cells with at least one successful sample (cells where all failed only show as failure rates)."""
    return [c for c in a.cells if c.durations.size]


def _loss_cells(a: Analysis) -> list[CellStats]:
    return [c for c in _timed(a) if c.mode in HANDSHAKE_MODES and not c.scenario]


def handshake_vs_loss(a: Analysis) -> Figure | None:
    cells = _loss_cells(a)
    if len({c.loss or 0 for c in cells}) < 2:
        return None  # one loss rate: a curve over loss says nothing; handshake_points shows these cells
    cols = colours(a)
    panels = _groups(cells, _panel_fields(a))[:MAX_PANELS]
    fig, axes = _grid(len(panels))
    used = []
    for ax, (key, members) in zip(axes, panels):
        ys: list = []
        for label, group in _by_label(a, members):
            group.sort(key=lambda c: c.loss or 0)
            _curves(ax, [100 * (c.loss or 0) for c in group], group, cols[label], ys)
            used.append(label)
        _log_if_wide(ax, ys)
        ax.set_title(_panel_title(key), fontsize="medium")
        ax.set_xlabel("loss per direction (%)")
        ax.set_ylabel("handshake time (ms)")
        ax.grid(alpha=0.3)
    fig.suptitle("Handshake time vs loss (95 % CI bands)")
    _legend(fig, cols, _unique(used), STYLE_HANDLES)
    return fig


MODE_STYLES = {"clean": ("-", "no retransmission"), "fast": (":", "recovered fast"),
               "timeout": ("--", "recovered after a timeout (≥ 200 ms)")}


def modes_vs_loss(a: Analysis) -> Figure | None:
    """The share of handshakes in each mode against loss: where a percentile sits between modes (its CI
    spanning the gap between clean and recovered handshakes), these shares are what stays stable."""
    cells = [c for c in _loss_cells(a) if c.modes]
    if len({c.loss or 0 for c in cells}) < 2:
        return None
    cols = colours(a)
    panels = _groups(cells, _panel_fields(a))[:MAX_PANELS]
    fig, axes = _grid(len(panels))
    used = []
    for ax, (key, members) in zip(axes, panels):
        for label, group in _by_label(a, members):
            group.sort(key=lambda c: c.loss or 0)
            xs = [100 * (c.loss or 0) for c in group]
            for mode, (ls, _) in MODE_STYLES.items():
                ax.plot(xs, [100 * c.modes[mode][0] for c in group], ls=ls, lw=1.6, color=cols[label],
                        marker="o" if mode == "clean" else None, ms=3)
                ax.fill_between(xs, [100 * c.modes[mode][1] for c in group], [100 * c.modes[mode][2] for c in group],
                                color=cols[label], alpha=0.12, lw=0)
            used.append(label)
        ax.set_title(_panel_title(key), fontsize="medium")
        ax.set_xlabel("loss per direction (%)")
        ax.set_ylabel("handshakes (%)")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    fig.suptitle("Handshakes by mode vs loss (Wilson 95 % CI bands)")
    _legend(fig, cols, _unique(used), [Line2D([], [], color="0.3", lw=1.6, ls=ls, label=name)
                                       for ls, name in MODE_STYLES.values()])
    return fig


def handshake_points(a: Analysis) -> Figure | None:
    """Runs with a single loss rate: median and p95 (with CIs) per algorithm, one panel per condition."""
    cells = _loss_cells(a)
    if not cells or len({c.loss or 0 for c in cells}) > 1:
        return None
    cols = colours(a)
    panels = _groups(cells, _panel_fields(a) + ("loss",))[:MAX_PANELS]
    rows = max(len(m) for _, m in panels)
    fig, axes = _grid(len(panels), width=5.6, height=1.2 + 0.38 * rows, max_cols=2)
    for ax, (key, members) in zip(axes, panels):
        groups = _by_label(a, members)
        xs = []
        for y, (label, group) in enumerate(groups):
            c = group[0]
            for q, marker, fill in ((50, "o", cols[label]), (95, "D", "white")):
                est, lo, hi = c.pct[q]
                ax.errorbar([est], [y], xerr=[[est - lo], [hi - est]], fmt=marker, color=cols[label], mfc=fill,
                            ms=6, capsize=3)
                xs += [lo, hi]
        ax.set_yticks(range(len(groups)), [l for l, _ in groups], fontsize="small")
        ax.set_ylim(len(groups) - 0.5, -0.5)
        ax.set_title(_panel_title(key), fontsize="medium")
        ax.set_xlabel("handshake time (ms)")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Handshake time per algorithm (95 % CIs)")
    handles = [Line2D([], [], color="0.3", marker="o", ls="none", label="median (p50)"),
               Line2D([], [], color="0.3", marker="D", mfc="white", ls="none", label="p95")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False, fontsize="small")
    return fig


def _by_label(a: Analysis, cells: list[CellStats]) -> list[tuple[str, list[CellStats]]]:
    out: dict[str, list] = {}
    for c in cells:
        out.setdefault(a.label(c), []).append(c)
    order = a.labels()
    return [(l, out[l]) for l in sorted(out, key=lambda l: order.index(l) if l in order else len(order))]


def _unique(items: list) -> list:
    return list(dict.fromkeys(items))


def scenarios(a: Analysis) -> Figure | None:
    """Named link conditions (5G-like, LTE-M-like …): grouped bars of the median, p95 as a tick."""
    cells = [c for c in _timed(a) if c.mode in HANDSHAKE_MODES and c.scenario]
    if not cells:
        return None
    cols = colours(a)
    names = _unique(c.scenario for c in sorted(cells, key=lambda c: (c.rtt_ms or 0, c.scenario)))
    labels = [l for l in a.labels() if any(a.label(c) == l for c in cells)]
    fig, (ax,) = _grid(1, width=max(6, 1.6 * len(names) * max(1, len(labels)) ** 0.5), height=3.8, max_cols=1)
    width = 0.8 / len(labels)
    ys = []
    for j, label in enumerate(labels):
        for i, name in enumerate(names):
            c = next((c for c in cells if c.scenario == name and a.label(c) == label), None)
            if c is None:
                continue
            x = i + (j - (len(labels) - 1) / 2) * width
            p50, lo, hi = c.pct[50]
            ax.bar(x, p50, width * 0.9, color=cols[label], yerr=[[p50 - lo], [hi - p50]], capsize=2)
            ax.plot([x - width * 0.4, x + width * 0.4], [c.pct[95][0]] * 2, color="black", lw=1.2, ls="--")
            ys += [p50, c.pct[95][0]]
    _log_if_wide(ax, ys)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("handshake time (ms)")
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Named scenarios: median (bar, 95 % CI) and p95 (dashed)")
    _legend(fig, cols, labels, [STYLE_HANDLES[1]])
    return fig


def wire(a: Analysis) -> Figure | None:
    """Bytes and packets per handshake, per direction (client TCP_INFO at handshake completion)."""
    cells = [c for c in a.cells if c.mode in HANDSHAKE_MODES and c.wire.get("bytes_c2s") is not None]
    if not cells:
        cells = [c for c in a.cells if c.wire.get("bytes_c2s") is not None]  # page/requests runs: same handshake
    if not cells:
        return None
    lossless = [c for c in cells if not c.loss] or cells  # retransmissions would blur the sizes
    cols = colours(a)
    per: dict[str, dict] = {}
    for label, group in _by_label(a, lossless):
        per[label] = {k: float(np.median([c.wire[k] for c in group if c.wire.get(k) is not None]))
                      for k in ("bytes_c2s", "bytes_s2c", "packets_c2s", "packets_s2c")}
    labels = list(per)
    fig, axes = _grid(2, width=max(4.5, 0.9 + 0.55 * len(labels)), height=3.6, max_cols=2)
    y = np.arange(len(labels))
    for ax, unit in zip(axes, ("bytes", "packets")):
        c2s = [per[l][f"{unit}_c2s"] for l in labels]
        s2c = [per[l][f"{unit}_s2c"] for l in labels]
        ax.barh(y - 0.2, c2s, 0.38, color=[cols[l] for l in labels], alpha=0.55, label="client → server")
        ax.barh(y + 0.2, s2c, 0.38, color=[cols[l] for l in labels], label="server → client")
        for yy, v1, v2 in zip(y, c2s, s2c):
            ax.text(v1, yy - 0.2, f" {v1:,.0f}", va="center", fontsize="x-small")
            ax.text(v2, yy + 0.2, f" {v2:,.0f}", va="center", fontsize="x-small")
        ax.set_yticks(y, labels, fontsize="small")
        ax.invert_yaxis()
        ax.set_xlabel(f"{unit} per handshake (median)")
        ax.margins(x=0.25)
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(handles=[Line2D([], [], color="0.35", alpha=0.55, lw=8, label="client → server"),
                            Line2D([], [], color="0.35", lw=8, label="server → client")],
                   fontsize="x-small", loc="lower right")
    fig.suptitle("Bytes and packets per handshake (TCP, per direction, at 0 % loss)")
    return fig


def pages(a: Analysis) -> Figure | None:
    cells = [c for c in _timed(a) if c.mode == "page" and page_bytes(c.page)]
    if not cells:
        return None
    cols = colours(a)
    panels = _groups(cells, _panel_fields(a, ("loss", "scenario")))[:MAX_PANELS]
    fig, axes = _grid(len(panels))
    used = []
    for ax, (key, members) in zip(axes, panels):
        ys: list = []
        for label, group in _by_label(a, members):
            group.sort(key=lambda c: page_bytes(c.page))
            _curves(ax, [page_bytes(c.page) / 1000 for c in group], group, cols[label], ys)
            used.append(label)
        _log_x_ticks(ax, [page_bytes(c.page) / 1000 for c in members])
        _log_if_wide(ax, ys)
        ax.set_title(_panel_title(key), fontsize="medium")
        ax.set_xlabel("page size (kB)")
        ax.set_ylabel("time to last byte (ms)")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("Download time vs page size (connection + handshake + GET)")
    _legend(fig, cols, _unique(used), STYLE_HANDLES)
    return fig


def requests(a: Analysis) -> Figure | None:
    """Request amortisation: total time and time per request as N requests share one handshake."""
    cells = [c for c in _timed(a) if c.mode == "requests" and c.requests]
    if not cells:
        return None
    cols = colours(a)
    panels = _groups(cells, _panel_fields(a, ("loss", "scenario", "page")))[:MAX_PANELS // 2]
    fig, axes = _grid(2 * len(panels), max_cols=2)
    used = []
    for i, (key, members) in enumerate(panels):
        total_ax, per_ax = axes[2 * i], axes[2 * i + 1]
        for label, group in _by_label(a, members):
            group.sort(key=lambda c: c.requests)
            xs = [c.requests for c in group]
            _curves(total_ax, xs, group, cols[label], [])
            per = [c.pct[50][0] / c.requests for c in group]
            per_ax.plot(xs, per, color=cols[label], marker="o", ms=3.5, lw=2)
            per_ax.fill_between(xs, [c.pct[50][1] / c.requests for c in group],
                                [c.pct[50][2] / c.requests for c in group], color=cols[label], alpha=0.25, lw=0)
            used.append(label)
        title = _panel_title(key)
        total_ax.set_title(f"{title}: total", fontsize="medium")
        total_ax.set_ylabel("time to last byte (ms)")
        per_ax.set_title(f"{title}: per request", fontsize="medium")
        per_ax.set_ylabel("median time / requests (ms)")
        for ax in (total_ax, per_ax):
            ax.set_xlabel("HTTP requests on the connection")
            _log_x_ticks(ax, [c.requests for c in members])
            ax.grid(alpha=0.3, which="both")
    fig.suptitle("Request amortisation: one handshake, N requests")
    _legend(fig, cols, _unique(used), STYLE_HANDLES)
    return fig


def cdfs(a: Analysis) -> Figure | None:
    """Empirical CDFs of the metric, one panel per condition (the first MAX_PANELS by RTT and loss)."""
    if not _timed(a):
        return None
    cols = colours(a)
    fields = tuple(f for f in ("scenario", "rtt_ms", "loss", "rate_mbit", "mtu", "initcwnd", "mode", "page",
                               "requests", "pad") if f not in a.variant_fields
                   and (f in ("rtt_ms", "loss") or len({c.row.get(f) for c in a.cells}) > 1))
    panels = [(k, m) for k, m in _groups(a.cells, fields) if any(c.durations.size for c in m)][:MAX_PANELS]
    fig, axes = _grid(len(panels), height=3.0)
    used = []
    for ax, (key, members) in zip(axes, panels):
        xs = []
        for label, group in _by_label(a, members):
            for c in group:
                d = np.sort(c.durations)
                if d.size:
                    ax.step(d, np.arange(1, d.size + 1) / d.size, where="post", color=cols[label], lw=1.5)
                    xs += [d[0], d[-1]]
                    used.append(label)
        if xs and max(xs) / max(min(xs), 1e-9) > 20:
            ax.set_xscale("log")
        ax.set_title(_panel_title({k: v for k, v in key.items() if k != "scenario"}) if not key.get("scenario")
                     else key["scenario"], fontsize="medium")
        ax.set_xlabel(f"{_metric_name(members[0])} (ms)")
        ax.set_ylabel("fraction of samples")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    fig.suptitle("Distribution of the measured time (empirical CDF)")
    _legend(fig, cols, _unique(used))
    return fig


def _metric_name(c: CellStats) -> str:
    return "time to last byte" if c.row.get("metric") == "last_byte" else "handshake time"


def phase_split(a: Analysis) -> Figure | None:
    """Median of each phase (Sosnowski et al.'s ClientHello→ServerHello and ServerHello→Finished split),
    per algorithm, at the lowest loss of each RTT."""
    cells = [c for c in a.cells if c.mode in HANDSHAKE_MODES and c.phases] or [c for c in a.cells if c.phases]
    if not cells:
        return None
    panels = []
    for key, members in _groups(cells, ("scenario",) + _panel_fields(a, ("page", "requests"))):
        low = min(c.loss or 0 for c in members)
        chosen = [c for c in members if (c.loss or 0) == low]
        panels.append((key, chosen))
    panels = panels[:MAX_PANELS // 2]
    every = dict.fromkeys(s[0] for p in proto.registered() for s in p.splits)  # TLS's, then SSH's own
    phase_labels = [p for p in every if any(p in c.phases for _, m in panels for c in m)]
    # TLS's phases keep their colours; the other protocols' (DTLS's, SSH's, IKEv2's) take tab20b's after them
    palette = ("#c7c7c7", "#9edae5", "#1f77b4", "#ff7f0e", "#98df8a", "#c5b0d5", "#f7b6d2", "#dbdb8d", "#8c564b",
               "#bcbd22", *matplotlib.colormaps["tab20b"].colors)
    shades = {p: palette[k % len(palette)] for k, p in enumerate(phase_labels)}
    rows_per_panel = max(len(m) for _, m in panels)
    fig, axes = _grid(len(panels), width=6.5, height=0.9 + 0.42 * rows_per_panel, max_cols=2)
    for ax, (key, members) in zip(axes, panels):
        members = sorted(members, key=lambda c: (a.labels().index(a.label(c)) if a.label(c) in a.labels() else 0,
                                                 c.mode or "", c.page or "", c.requests or 0))
        names = [a.label(c) + (f" ({c.mode} {c.page or c.requests or ''})".rstrip() if c.mode not in HANDSHAKE_MODES
                               else "") for c in members]
        left = np.zeros(len(members))
        for ph in phase_labels:
            widths = np.array([c.phases.get(ph, 0.0) for c in members])
            ax.barh(range(len(members)), widths, left=left, color=shades[ph], label=ph, edgecolor="white", lw=0.5)
            left += widths
        ax.set_yticks(range(len(members)), names, fontsize="small")
        ax.invert_yaxis()
        loss = members[0].loss or 0
        title = key["scenario"] or _panel_title({k: v for k, v in key.items() if k != "scenario"})
        ax.set_title(f"{title}, loss {100 * loss:g} %", fontsize="medium")
        ax.set_xlabel("median of each phase (ms)")
        ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color=shades[p], lw=8, label=p) for p in phase_labels]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize="small")
    fig.suptitle("Where the time goes: phases of the connection (medians)")
    return fig


MODEL_PARTS = (("rtt_ms", "round trips", "#c6dbef"), ("serialisation_ms", "serialisation", "#fdd0a2"),
               ("slow_start_ms", "slow-start rounds", "#fcbba1"), ("crypto_ms", "crypto", "#c7e9c0"))


def model_overlay(a: Analysis) -> Figure | None:
    """Measured median (dot, IQR whisker) beside the lower-bound model (stacked bar) per cell, at the
    lowest loss of each condition (loss only adds time the model leaves out)."""
    cells = [c for c in a.cells if c.bound is not None and c.durations.size]
    if not cells:
        return None
    fields = tuple(f for f in ("scenario", "rtt_ms", "rate_mbit", "mtu", "initcwnd", "mode", "page", "requests",
                               "pad", "kex", "sig"))
    chosen = []
    for _, members in _groups(cells, fields):
        low = min(c.loss or 0 for c in members)
        chosen += [c for c in members if (c.loss or 0) == low]
    chosen = chosen[:MAX_ROWS]
    cols = colours(a)
    fig, (ax,) = _grid(1, width=8.5, height=0.9 + 0.36 * len(chosen), max_cols=1)
    y = np.arange(len(chosen))
    left = np.zeros(len(chosen))
    for key, name, shade in MODEL_PARTS:
        widths = np.array([c.bound.parts[key] for c in chosen])
        ax.barh(y, widths, left=left, color=shade, label=f"model: {name}", height=0.6)
        left += widths
    for yy, c in zip(y, chosen):
        p25, p50, p75 = c.pct[25][0], c.pct[50][0], c.pct[75][0]
        ax.plot([p25, p75], [yy, yy], color=cols[a.label(c)], lw=1.5)
        ax.plot(p50, yy, "o", color=cols[a.label(c)], ms=6, mec="black", mew=0.6)
    names = [f"{a.label(c)} · {condition(c.row, short=True)}" for c in chosen]
    ax.set_yticks(y, names, fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color=s, lw=8, label=f"lower bound: {n}") for _, n, s in MODEL_PARTS]
    handles.append(Line2D([], [], color="0.3", marker="o", mec="black", lw=1.5, label="measured median, p25–p75"))
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize="small")
    fig.suptitle("Measured vs lower-bound model (round trips + serialisation + slow start + crypto)")
    return fig


def failures(a: Analysis) -> Figure | None:
    """Failure rate vs loss with Wilson 95 % intervals; only when some sample failed."""
    if not any(c.failures for c in a.cells):
        return None
    cols = colours(a)
    cells = [c for c in a.cells if not c.scenario]
    named = [c for c in a.cells if c.scenario]
    panels = _groups(cells, _panel_fields(a, ("page", "requests")))[:MAX_PANELS] if cells else []
    fig, axes = _grid(len(panels) + (1 if named else 0))
    used = []
    for ax, (key, members) in zip(axes, panels):
        for label, group in _by_label(a, members):
            group.sort(key=lambda c: c.loss or 0)
            xs = [100 * (c.loss or 0) for c in group]
            p = [100 * c.failure_rate[0] for c in group]
            err = [[100 * (c.failure_rate[0] - c.failure_rate[1]) for c in group],
                   [100 * (c.failure_rate[2] - c.failure_rate[0]) for c in group]]
            ax.errorbar(xs, p, yerr=err, color=cols[label], marker="o", ms=3.5, capsize=2, lw=1.5)
            used.append(label)
        ax.set_title(_panel_title(key), fontsize="medium")
        ax.set_xlabel("loss per direction (%)")
        ax.set_ylabel("failed samples (%)")
        ax.grid(alpha=0.3)
    if named:
        ax = axes[len(panels)]
        names = _unique(c.scenario for c in named)
        for label, group in _by_label(a, named):
            xs = [names.index(c.scenario) for c in group]
            ax.errorbar(xs, [100 * c.failure_rate[0] for c in group],
                        yerr=[[100 * (c.failure_rate[0] - c.failure_rate[1]) for c in group],
                              [100 * (c.failure_rate[2] - c.failure_rate[0]) for c in group]],
                        color=cols[label], marker="o", ls="none", capsize=2)
            used.append(label)
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("failed samples (%)")
        ax.set_title("named scenarios", fontsize="medium")
        ax.grid(alpha=0.3)
    fig.suptitle("Failure rate (Wilson 95 % CI)")
    _legend(fig, cols, _unique(used))
    return fig


# (id, title, function, what it shows when present)
def targets_vs_path(a: Analysis) -> Figure | None:
    """Median handshake time (95 % CI) against the measured path RTT, one colour per algorithm, each
    target named once beside its highest point."""
    cells = [c for c in targets.target_cells(a) if targets.path_rtt(c) is not None]
    if not cells:
        return None
    cols = colours(a)
    labels = [l for l in a.labels() if any(a.label(c) == l for c in cells)]
    fig, (ax,) = _grid(1, width=9.5, height=4.6, max_cols=1)
    for label in labels:
        mine = sorted((c for c in cells if a.label(c) == label), key=targets.path_rtt)
        y = [c.pct[50][0] for c in mine]
        err = [[c.pct[50][0] - c.pct[50][1] for c in mine], [c.pct[50][2] - c.pct[50][0] for c in mine]]
        ax.errorbar([targets.path_rtt(c) for c in mine], y, yerr=err, color=cols[label], marker="o", ls="",
                    capsize=3)
    for name in sorted({c.target for c in cells}):
        top = max((c for c in cells if c.target == name), key=lambda c: c.pct[50][0])
        ax.annotate(name, (targets.path_rtt(top), top.pct[50][0]), textcoords="offset points", xytext=(6, 0),
                    fontsize=7, color="0.35", va="center")
    hi = max(targets.path_rtt(c) for c in cells) * 1.15
    ax.plot([0, hi], [0, 2 * hi], color="grey", ls=":", lw=1)  # 2 round trips: TCP + TLS 1.3
    ax.set_xlabel("measured path RTT (ms): TCP connect p50, mean of before and after the cell")
    ax.set_ylabel("handshake time (ms)")
    ax.grid(alpha=0.3)
    fig.suptitle("Targets: median handshake time (95 % CI) vs the measured path; dotted, 2 × RTT")
    _legend(fig, cols, labels)
    return fig


def _load_colours(a: Analysis) -> dict:
    labels = list(dict.fromkeys(loadreport.label(r) for r in a.load))
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def load_latency(a: Analysis) -> Figure | None:
    """Latency (p50 solid, p99 dashed) against the offered rate, one panel per server stack (and link)."""
    if not a.load:
        return None
    cols = _load_colours(a)
    panels = sorted({(r["server"], condition(r, short=True)) for r in a.load})
    fig, axes = _grid(len(panels))
    for ax, (server, cond) in zip(axes, panels):
        for r in (r for r in a.load if (r["server"], condition(r, short=True)) == (server, cond)):
            steps = [s for s in r["steps"] if s.get("latency_ms")]
            x = [s["offered_rate"] for s in steps]
            colour = cols[loadreport.label(r)]
            ax.plot(x, [s["latency_ms"]["p50"] for s in steps], color=colour, marker="o", ms=3)
            ax.plot(x, [s["latency_ms"]["p99"] for s in steps], color=colour, ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered handshakes/s")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"{server}, {cond}", fontsize="medium")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("Latency under load: p50 (solid), p99 (dashed), from each arrival's scheduled time")
    _legend(fig, cols, list(cols), STYLE_HANDLES[:1] + [Line2D([], [], color="0.3", lw=1, ls="--", label="p99")])
    return fig


def load_capacity(a: Analysis) -> Figure | None:
    """Handshakes/s at saturation per server stack and algorithm; hatched: a lower bound (client-bound)."""
    if not a.load:
        return None
    cols = _load_colours(a)
    servers = sorted({r["server"] for r in a.load})
    labels = list(cols)
    fig, (ax,) = _grid(1, width=max(6, 1.5 * len(servers) * max(1, len(labels)) ** 0.5), height=3.8, max_cols=1)
    width = 0.8 / len(labels)
    for j, label in enumerate(labels):
        for i, server in enumerate(servers):
            r = next((r for r in a.load if r["server"] == server and loadreport.label(r) == label), None)
            v = (r or {}).get("load") or {}
            if not v.get("at_least_hs"):
                continue
            bound = v.get("saturated_by") != "server"
            ax.bar(i + (j - (len(labels) - 1) / 2) * width, v["at_least_hs"], width * 0.9, color=cols[label],
                   hatch="//" if bound else None, alpha=0.5 if bound else 1)
    ax.set_xticks(range(len(servers)), servers)
    ax.set_ylabel("handshakes/s")
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Server capacity: handshakes/s at saturation (hatched: the client saturated first, a lower bound)")
    _legend(fig, cols, labels)
    return fig


FIGURES = (
    ("handshake-vs-loss", "Handshake time vs loss", handshake_vs_loss),
    ("modes", "Handshakes by mode vs loss", modes_vs_loss),
    ("handshake", "Handshake time per algorithm", handshake_points),
    ("scenarios", "Named scenarios", scenarios),
    ("wire", "Bytes and packets per handshake", wire),
    ("pages", "Download time vs page size", pages),
    ("requests", "Request amortisation", requests),
    ("cdf", "Distributions (CDF)", cdfs),
    ("phases", "Phase split", phase_split),
    ("model", "Measured vs lower-bound model", model_overlay),
    ("failures", "Failure rates", failures),
    ("targets", "Targets: handshake time vs the measured path", targets_vs_path),
    ("load-latency", "Latency under load", load_latency),
    ("load-capacity", "Server capacity", load_capacity),
)


def render_all(a: Analysis, figures=FIGURES) -> list[tuple[str, str, Figure]]:
    """The figures (of a table like FIGURES) this run has data for, as (id, title, figure)."""
    out = []
    for fid, title, fn in figures:
        fig = fn(a)
        if fig is not None:
            out.append((fid, title, fig))
    return out
