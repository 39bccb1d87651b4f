"""The report's sections, each one registered record: the tables and figures a capability adds to a run's report,
where they stand, and its figures' captions. A capability's report is its module registering a Section (as an axis
registers its Axis) and that module's line in pqbench.report, the import that fills the table; the report
assembles the sections in order and leaves out the tables a run has no data for (None).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping


@dataclasses.dataclass(frozen=True)
class Section:
    name: str
    order: int  # where its tables stand among the others' (the cells' own at 50, provenance at 70)
    tables: Callable[[Any, str, Any], list] = lambda con, run_id, a: []  # (store, run id, Analysis) -> Table or None
    # (store, run id) -> its figures: (id, title, Analysis -> a Figure or None), drawn where the run has their data
    figures: Callable[[Any, str], tuple] = lambda con, run_id: ()
    figure_order: int = 50  # where its figures stand among the others' (the cells' own at 50)
    captions: Mapping[str, str] = dataclasses.field(default_factory=dict)  # figure id -> caption


_REGISTRY: dict[str, Section] = {}


def register(section: Section) -> None:
    _REGISTRY[section.name] = section


def unregister(name: str) -> None:
    """Removes a section (a test's own)."""
    _REGISTRY.pop(name, None)


def tables(con, run_id: str, a) -> list:
    """Every section's tables that the run has data for, in the sections' order."""
    ordered = sorted(_REGISTRY.values(), key=lambda s: s.order)
    return [t for s in ordered for t in s.tables(con, run_id, a) if t is not None]


def figures(con, run_id: str) -> list:
    """Every section's figures, in the sections' figure order."""
    return [f for s in sorted(_REGISTRY.values(), key=lambda s: s.figure_order) for f in s.figures(con, run_id)]


def caption(figure_id: str) -> str:
    return next((s.captions[figure_id] for s in _REGISTRY.values() if figure_id in s.captions), "")
