"""The phase-split figure colours every protocol's phases at once: a report with TLS, DTLS, SSH and IKEv2 cells has
more phases than the figure's first palette (a preset's report raised KeyError on IKEv2's)."""

import pqbench.experiment.axes  # noqa: F401  (the registries: every protocol)
from pqbench import protocol as proto
from pqbench.report import plots


class Cell:
    mode, page, requests, loss = "handshake", None, None, 0.0

    def __init__(self, phases):
        self.phases, self.row = phases, {"scenario": "RTT 31.1 ms", "rtt_ms": 31.1}


class Analysis:
    variant_fields = ()

    def __init__(self, cells):
        self.cells = cells

    def labels(self):
        return [f"cell {k}" for k in range(len(self.cells))]

    def label(self, c):
        return f"cell {self.cells.index(c)}"


def test_every_protocol_s_phases_have_a_colour_of_their_own_in_one_figure():
    labels = list(dict.fromkeys(s[0] for p in proto.registered() for s in p.splits))
    assert len(labels) > 10  # more than the first palette holds
    fig = plots.phase_split(Analysis([Cell({lab: 1.0 for lab in labels[:8]}), Cell({lab: 2.0 for lab in labels[8:]})]))
    legend = fig.legends[0]
    shown = {t.get_text(): h.get_color() for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert list(shown) == labels and len(set(shown.values())) == len(labels), shown
