"""A load cell's plan: the offered rates in steps (a list, or a ramp that doubles), how long each is offered
and the bound on them all, from a spec's [load] table or `pqbench load`'s options (pqbench.measure.capacity
measures it)."""

from __future__ import annotations

import dataclasses
import math

from pqbench import units
from pqbench.errors import BadInput


@dataclasses.dataclass(frozen=True)
class LoadPlan:
    rates: tuple[float, ...] | None = None  # None: a ramp from start_rate, doubling, up to max_rate
    step_ms: int = 2000
    start_rate: float = 25.0
    max_rate: float = 20000.0
    time_bound_s: float = 300.0  # per cell
    max_inflight: int = 4096
    seed: int = 1

    def schedule(self) -> list[float]:
        if self.rates:
            return list(self.rates)
        n = int(math.floor(math.log2(self.max_rate / self.start_rate))) + 1
        return [self.start_rate * 2 ** k for k in range(max(n, 1))]

    def check(self, field: str = "load.rates") -> "LoadPlan":
        """A plan whose steps cannot all run within the time bound is refused before anything starts."""
        need = len(self.schedule()) * self.step_ms / 1000
        if need > self.time_bound_s:
            raise BadInput(field, f"{len(self.schedule())} steps of {self.step_ms / 1000:g} s need {need:g} s, "
                                             f"over the time bound of {self.time_bound_s:g} s: fewer rates, shorter "
                                             "steps or a longer time_bound")
        return self


def plan_from(field, rates, start, max_rate, step, time_bound, max_inflight: int = 4096, seed: int = 1) -> LoadPlan:
    """A LoadPlan from user values (a spec's [load] table or the options), checked against its time bound.
    field(key): how the user named that value ("load.step" in a spec, "--step" on the command line)."""
    listed = None
    if rates != "ramp":
        values = rates if isinstance(rates, list) else str(rates).split(",")
        listed = tuple(units.number(f"{field('rates')}[{i}]", v, minimum=0.1, maximum=1e6) for i, v in enumerate(values))
        if not listed:
            raise BadInput(field("rates"), "give rates (handshakes per second) or ramp")
    lo = units.number(field("start"), start, minimum=0.1, maximum=1e6)
    return LoadPlan(rates=listed, start_rate=lo, max_rate=units.number(field("max_rate"), max_rate, minimum=lo, maximum=1e6),
                    step_ms=int(units.duration_ms(field("step"), step, allow_zero=False)),
                    time_bound_s=units.duration_ms(field("time_bound"), time_bound, allow_zero=False) / 1000,
                    max_inflight=max_inflight, seed=seed).check(field("rates"))
