"""What the emulated link does: LinkSpec (per direction or symmetric) and the TCP knobs per route.

Field meanings follow DESIGN.md and netem: each direction has a one-way delay (half the RTT when
given symmetrically), jitter (uniform in [-jitter, +jitter] on that direction's delay), a loss
model (Bernoulli, or Gilbert-Elliott with netem's p, r, 1-h, 1-k), an optional rate limit or a
delivery trace (mahimahi's format, traces.py) with a bounded queue in front of it managed by
drop-tail, CoDel or PIE (Aqm), and a per-packet overhead counted at the rate. MTU and seed are per
link. Every value is validated on construction; errors are BadInput naming the CLI field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from pqbench import units
from pqbench.errors import BadInput
from pqbench.testbed import traces
from pqbench.testbed.middlebox import Middlebox

MTU_MIN, MTU_MAX = 576, 65535
QUEUE_MAX = 10_000_000
SEED_MAX = 2**64 - 1


def _prob(field_name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise BadInput(field_name, f"{value!r} is outside 0..100 %")
    return float(value)


@dataclass(frozen=True)
class Loss:
    """Loss model of one direction. model: none | bernoulli (p) | gemodel (p, r, 1-h, 1-k).

    Gilbert-Elliott as netem: p = P(good -> bad), r = P(bad -> good), one_minus_h = loss
    probability in the bad state, one_minus_k = loss probability in the good state. iproute2's
    defaults for a bare "gemodel p": r = 100 %, 1-h = 100 %, 1-k = 0 %.
    """

    model: str = "none"
    p: float = 0.0
    r: float = 1.0
    one_minus_h: float = 1.0
    one_minus_k: float = 0.0

    def __post_init__(self):
        if self.model not in ("none", "bernoulli", "gemodel"):
            raise BadInput("loss", f"unknown model {self.model!r} (allowed: none, bernoulli, gemodel)")
        name = "loss" if self.model != "gemodel" else "gemodel"
        for v in (self.p, self.r, self.one_minus_h, self.one_minus_k):
            _prob(name, v)

    @classmethod
    def bernoulli(cls, p: float) -> "Loss":
        return cls("bernoulli", _prob("loss", p)) if p > 0 else cls()

    @classmethod
    def gemodel(cls, p: float, r: float = 1.0, one_minus_h: float = 1.0, one_minus_k: float = 0.0) -> "Loss":
        return cls("gemodel", p, r, one_minus_h, one_minus_k)

    @property
    def mean(self) -> float:
        """Long-run fraction of packets lost."""
        if self.model == "bernoulli":
            return self.p
        if self.model == "gemodel":
            if self.p + self.r == 0:
                return self.one_minus_k  # never leaves the good state
            bad = self.p / (self.p + self.r)
            return (1 - bad) * self.one_minus_k + bad * self.one_minus_h
        return 0.0

    def describe(self) -> str:
        if self.model == "bernoulli":
            return f"loss {_pct(self.p)}"
        if self.model == "gemodel":
            return (f"loss gemodel p {_pct(self.p)} r {_pct(self.r)} 1-h {_pct(self.one_minus_h)} "
                    f"1-k {_pct(self.one_minus_k)} (mean {_pct(self.mean)})")
        return "no loss"


# Queue disciplines and their parameters: (kind of value, default). Durations in ms.
AQM_PARAMS: dict[str, dict[str, tuple[str, float]]] = {
    "droptail": {},
    "codel": {"target": ("duration", 5.0), "interval": ("duration", 100.0)},  # RFC 8289
    "pie": {"target": ("duration", 15.0), "tupdate": ("duration", 15.0), "alpha": ("gain", 0.125),
            "beta": ("gain", 1.25), "max_burst": ("duration", 150.0)},  # RFC 8033
}
AQM_TITLES = {"droptail": "drop-tail", "codel": "CoDel", "pie": "PIE"}
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


@dataclass(frozen=True)
class Aqm:
    """The discipline of the queue in front of the rate (or trace): drop-tail (the queue's limits
    only), CoDel (RFC 8289) or PIE (RFC 8033), with the parameters that differ from the RFC's
    defaults as sorted (name, value) pairs (durations in ms), and ECN marking instead of drops (off).
    Aqm.parse("codel target=5ms interval=100ms") reads mahimahi's style: a name, then key=value."""

    kind: str = "droptail"
    params: tuple = ()
    ecn: bool = False

    def __post_init__(self):
        if self.kind not in AQM_PARAMS:
            raise BadInput("queue", f"unknown queue discipline {self.kind!r} (allowed: {', '.join(AQM_PARAMS)})")
        items = self.params.items() if isinstance(self.params, dict) else self.params
        allowed = AQM_PARAMS[self.kind]
        clean = {}
        for item in items:
            name, value = item
            if name not in allowed:
                raise BadInput("queue", f"{self.kind} has no parameter {name!r} (allowed: "
                                        f"{', '.join(allowed) or 'none'})")
            kind = allowed[name][0]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise BadInput("queue", f"{self.kind} {name}={value!r} is not a number")
            if kind == "duration" and not 0 < value <= 3_600_000 and not (name == "max_burst" and value == 0):
                raise BadInput("queue", f"{self.kind} {name}={value:g} ms must be a duration > 0 (at most an hour)")
            if name == "tupdate" and value < 0.001:
                raise BadInput("queue", f"pie tupdate={value:g} ms must be at least 1 us")
            if kind == "gain" and not 0 <= value <= 1000:
                raise BadInput("queue", f"pie {name}={value:g} must be in 0..1000")
            if float(value) != allowed[name][1]:  # a default is kept implicit, so equal queues compare equal
                clean[name] = float(value)
        object.__setattr__(self, "params", tuple(sorted(clean.items())))
        if not isinstance(self.ecn, bool):
            raise BadInput("queue", f"ecn={self.ecn!r} must be true or false")

    @classmethod
    def parse(cls, text, field_name: str = "queue") -> "Aqm":
        """'codel', 'codel target=5ms interval=100ms', 'pie target=20ms ecn' (or ecn=on)."""
        if isinstance(text, Aqm):
            return text
        words = str(text).replace(",", " ").split()
        if not words:
            raise BadInput(field_name, f"an empty queue discipline (allowed: {', '.join(AQM_PARAMS)})")
        kind = words[0].lower().replace("-", "")
        if kind not in AQM_PARAMS:
            raise BadInput(field_name, f"unknown queue discipline {words[0]!r} (allowed: {', '.join(AQM_PARAMS)})")
        allowed = AQM_PARAMS[kind]
        params, ecn = {}, False
        for w in words[1:]:
            name, eq, value = w.partition("=")
            name = name.lower()
            if name == "ecn":
                if eq and value.lower() not in _ON + _OFF:
                    raise BadInput(field_name, f"ecn={value!r} must be on or off")
                ecn = not eq or value.lower() in _ON
                continue
            if name not in allowed:
                raise BadInput(field_name, f"{kind} has no parameter {name!r} (allowed: "
                                           f"{', '.join([*allowed, 'ecn'])})")
            if not eq or not value:
                raise BadInput(field_name, f"{kind} {name} needs a value ({name}=...)")
            if allowed[name][0] == "duration":
                params[name] = units.duration_ms(field_name, value)
            else:
                params[name] = units.number(field_name, value, minimum=0, maximum=1000)
        try:
            return cls(kind, params, ecn)
        except BadInput as e:
            raise BadInput(field_name, e.detail) from None

    def value(self, name: str) -> float:
        """A parameter as set, or the RFC's default."""
        return dict(self.params).get(name, AQM_PARAMS[self.kind][name][1])

    def describe(self) -> str:
        parts = [AQM_TITLES[self.kind]]
        if self.kind != "droptail":
            shown = []
            for name, (kind, _) in AQM_PARAMS[self.kind].items():
                v = self.value(name)
                shown.append(f"{name} {v:g} ms" if kind == "duration" else f"{name} {v:g}")
            parts.append(", ".join(shown))
        if self.ecn:
            parts.append("ECN")
        return " ".join(parts[:1]) + (f" ({'; '.join(parts[1:])})" if len(parts) > 1 else "")

    def to_text(self) -> str:
        """The parse() form: 'codel target=10ms' (what the CLI and specs accept)."""
        words = [self.kind]
        for name, v in self.params:
            words.append(f"{name}={v:g}ms" if AQM_PARAMS[self.kind][name][0] == "duration" else f"{name}={v:g}")
        if self.ecn:
            words.append("ecn")
        return " ".join(words)


@dataclass(frozen=True)
class Direction:
    """One direction of the link."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: Loss = field(default_factory=Loss)
    rate_mbit: float | None = None  # None = unlimited
    queue_packets: int = 1000  # bound of the queue in front of the rate limiter (tail drop)
    queue_bytes: int | None = None
    overhead_bytes: int = 0  # per-packet bytes counted at the rate (e.g. 38 for Ethernet framing)
    reorder: bool = False  # jitter may reorder packets
    # a delivery trace replacing the rate: a shipped trace's file name (traces/) or a path; None = none
    trace: str | None = None
    aqm: Aqm = field(default_factory=Aqm)  # the queue's discipline
    middlebox: Middlebox | None = None  # an ossified middlebox in front of the link (pqlink only)

    def __post_init__(self):
        for name, v in (("delay", self.delay_ms), ("jitter", self.jitter_ms)):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise BadInput(name, f"{v!r} must be a duration >= 0")
        if self.delay_ms > 3_600_000:
            raise BadInput("delay", f"{self.delay_ms} ms is more than an hour")
        if self.jitter_ms > 3_600_000:
            raise BadInput("jitter", f"{self.jitter_ms} ms is more than an hour")
        if self.rate_mbit is not None and (not math.isfinite(self.rate_mbit) or self.rate_mbit <= 0):
            raise BadInput("rate", f"{self.rate_mbit!r} must be a rate > 0 (omit it for no limit)")
        if self.rate_mbit is not None and self.rate_mbit * 1e6 < 1:
            raise BadInput("rate", f"{self.rate_mbit} Mbit/s is below 1 bit/s")
        if not isinstance(self.queue_packets, int) or not 1 <= self.queue_packets <= QUEUE_MAX:
            raise BadInput("queue", f"{self.queue_packets!r} must be a whole number of packets in 1..{QUEUE_MAX}")
        if self.queue_bytes is not None and (not isinstance(self.queue_bytes, int) or self.queue_bytes < 1):
            raise BadInput("queue_bytes", f"{self.queue_bytes!r} must be a whole number of bytes >= 1")
        if not isinstance(self.overhead_bytes, int) or not 0 <= self.overhead_bytes <= 65535:
            raise BadInput("overhead", f"{self.overhead_bytes!r} must be a whole number of bytes in 0..65535")
        if isinstance(self.aqm, dict):  # from a stored spec
            object.__setattr__(self, "aqm", Aqm(**self.aqm))
        if not isinstance(self.aqm, Aqm):
            raise BadInput("queue", f"{self.aqm!r} is not a queue discipline")
        if isinstance(self.middlebox, dict):  # from a stored spec
            object.__setattr__(self, "middlebox", Middlebox(**self.middlebox))
        if self.middlebox is not None and not isinstance(self.middlebox, Middlebox):
            raise BadInput("middlebox", f"{self.middlebox!r} is not a middlebox")
        if self.trace is not None:
            if not isinstance(self.trace, str):
                raise BadInput("trace", f"{self.trace!r} must be a trace name or a file path")
            traces.info(self.trace)  # BadInput naming the file and the line

    @property
    def shaped(self) -> bool:
        """A bottleneck with a queue: a rate limit or a trace."""
        return self.rate_mbit is not None or self.trace is not None

    def describe(self) -> str:
        parts = [f"delay {self.delay_ms:g} ms"]
        if self.jitter_ms:
            parts.append(f"jitter ±{self.jitter_ms:g} ms{' (may reorder)' if self.reorder else ''}")
        parts.append(self.loss.describe())
        if self.shaped:
            q = f"queue {self.queue_packets} packets"
            if self.queue_bytes:
                q += f"/{self.queue_bytes} B"
            if self.aqm.kind != "droptail" or self.aqm.ecn:
                q += f", {self.aqm.describe()}"
            if self.trace is not None:
                t = traces.info(self.trace)
                parts.append(f"trace {self.trace} (mean {t.mean_mbit:.3g} Mbit/s, period {t.period_ms / 1000:g} s), {q}")
            else:
                parts.append(f"rate {self.rate_mbit:g} Mbit/s, {q}")
            if self.overhead_bytes:
                parts.append(f"overhead {self.overhead_bytes} B/packet")
        if self.middlebox is not None:
            parts.append(self.middlebox.describe())
        return ", ".join(parts)


@dataclass(frozen=True)
class LinkSpec:
    """The emulated link between the client and the server namespace."""

    client_to_server: Direction = field(default_factory=Direction)
    server_to_client: Direction = field(default_factory=Direction)
    mtu: int = 1500
    seed: int = 1

    def __post_init__(self):
        if not isinstance(self.mtu, int) or not MTU_MIN <= self.mtu <= MTU_MAX:
            raise BadInput("mtu", f"{self.mtu!r} must be a whole number of bytes in {MTU_MIN}..{MTU_MAX}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= SEED_MAX:
            raise BadInput("seed", f"{self.seed!r} must be a whole number in 0..2^64-1")

    @property
    def rtt_ms(self) -> float:
        """Configured round-trip time: the sum of both one-way delays."""
        return self.client_to_server.delay_ms + self.server_to_client.delay_ms

    @property
    def directions(self) -> dict[str, Direction]:
        return {"client_to_server": self.client_to_server, "server_to_client": self.server_to_client}

    @classmethod
    def symmetric(cls, rtt_ms: float = 0.0, *, jitter_ms: float = 0.0, loss: float | Loss = 0.0,
                  rate_mbit: float | None = None, queue_packets: int = 1000, queue_bytes: int | None = None,
                  overhead_bytes: int = 0, reorder: bool = False, mtu: int = 1500, seed: int = 1,
                  aqm: Aqm | str | None = None, trace: str | None = None) -> "LinkSpec":
        """Both directions alike; each gets half the RTT as one-way delay. trace: a shipped trace's
        name without suffix ('ATT-LTE-driving-2016': .up client->server, .down back) or one file for both."""
        if not isinstance(rtt_ms, (int, float)) or not math.isfinite(rtt_ms) or rtt_ms < 0:
            raise BadInput("rtt", f"{rtt_ms!r} must be a duration >= 0")
        loss_model = loss if isinstance(loss, Loss) else Loss.bernoulli(_prob("loss", loss))
        queue = Aqm.parse(aqm) if aqm is not None else Aqm()
        up = traces.canonical(trace, "up") if trace is not None else None
        down = traces.canonical(trace, "down") if trace is not None else None
        c2s = Direction(rtt_ms / 2, jitter_ms, loss_model, rate_mbit, queue_packets, queue_bytes,
                        overhead_bytes, reorder, up, queue)
        s2c = dataclasses.replace(c2s, trace=down) if down != up else c2s
        return cls(c2s, s2c, mtu, seed)

    @property
    def needs_pqlink(self) -> str | None:
        """What of this spec only pqlink emulates (a trace, CoDel/PIE, ECN marking), or None."""
        for name, d in self.directions.items():
            if d.trace is not None:
                return f"{name}: a delivery trace"
            if d.aqm.kind != "droptail" or d.aqm.ecn:
                return f"{name}: {d.aqm.describe()}"
            if d.middlebox is not None:
                return f"{name}: an ossified middlebox"
        return None

    def replace(self, **changes) -> "LinkSpec":
        return dataclasses.replace(self, **changes)

    def map_directions(self, fn) -> "LinkSpec":
        """A copy with fn(Direction) -> Direction applied to both directions."""
        return dataclasses.replace(self, client_to_server=fn(self.client_to_server),
                                   server_to_client=fn(self.server_to_client))

    def describe(self) -> str:
        """One readable line (Mininet-style echo of the link parameters)."""
        c2s, s2c = self.client_to_server, self.server_to_client
        if c2s == s2c:
            body = f"each way: {c2s.describe()}"
        else:
            body = f"client->server: {c2s.describe()}; server->client: {s2c.describe()}"
        return f"RTT {self.rtt_ms:g} ms, MTU {self.mtu}, seed {self.seed}; {body}"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["rtt_ms"] = self.rtt_ms
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LinkSpec":
        def direction(x: dict) -> Direction:
            x = dict(x)
            x["loss"] = Loss(**x.get("loss", {}))
            if "aqm" in x:
                a = x["aqm"]
                x["aqm"] = Aqm(a.get("kind", "droptail"), tuple(tuple(p) for p in a.get("params", ())),
                               a.get("ecn", False))
            return Direction(**x)
        return cls(direction(d["client_to_server"]), direction(d["server_to_client"]),
                   d.get("mtu", 1500), d.get("seed", 1))

    @classmethod
    def parse(cls, *, rtt=None, delay_c2s=None, delay_s2c=None, jitter=None, loss=None, loss_c2s=None,
              loss_s2c=None, gemodel=None, rate=None, rate_c2s=None, rate_s2c=None, queue=None,
              queue_bytes=None, overhead=None, reorder=False, mtu=None, seed=None, trace_up=None,
              trace_down=None, aqm=None, middlebox=None) -> "LinkSpec":
        """Builds a LinkSpec from user text with units ('31.1ms', '1%', '10mbit'); None = default.

        rtt splits evenly into the two one-way delays; delay_c2s/delay_s2c set one direction
        (with rtt, the other direction gets the rest). loss and gemodel apply to both directions
        unless loss_c2s/loss_s2c are given. trace_up/trace_down replay a delivery trace client->server /
        server->client instead of the rate (a shipped name, with or without its .up/.down suffix, or a
        file); aqm is the queue discipline of both directions ('codel target=5ms', Aqm.parse); middlebox
        an ossified middlebox client->server ('reset', 'drop max=1400', Middlebox.parse). Errors
        name the field as the CLI option is named.
        """
        c2s_delay = s2c_delay = 0.0
        rtt_ms = units.duration_ms("rtt", rtt) if rtt is not None else None
        d_c2s = units.duration_ms("delay_c2s", delay_c2s) if delay_c2s is not None else None
        d_s2c = units.duration_ms("delay_s2c", delay_s2c) if delay_s2c is not None else None
        if rtt_ms is not None:
            if d_c2s is not None and d_s2c is not None:
                raise BadInput("rtt", "give --rtt or both one-way delays, not all three")
            if d_c2s is not None or d_s2c is not None:
                one = d_c2s if d_c2s is not None else d_s2c
                if one > rtt_ms:
                    raise BadInput("delay_c2s" if d_c2s is not None else "delay_s2c",
                                   f"{one:g} ms is more than the RTT {rtt_ms:g} ms")
                c2s_delay, s2c_delay = (one, rtt_ms - one) if d_c2s is not None else (rtt_ms - one, one)
            else:
                c2s_delay = s2c_delay = rtt_ms / 2
        else:
            c2s_delay, s2c_delay = d_c2s or 0.0, d_s2c or 0.0

        jitter_ms = units.duration_ms("jitter", jitter) if jitter is not None else 0.0
        if loss is not None and gemodel is not None:
            raise BadInput("gemodel", "give either --loss (Bernoulli) or --gemodel, not both")
        base_loss = Loss()
        if loss is not None:
            base_loss = Loss.bernoulli(units.probability("loss", loss))
        elif gemodel is not None:
            base_loss = parse_gemodel("gemodel", gemodel)
        loss_c = Loss.bernoulli(units.probability("loss_c2s", loss_c2s)) if loss_c2s is not None else base_loss
        loss_s = Loss.bernoulli(units.probability("loss_s2c", loss_s2c)) if loss_s2c is not None else base_loss

        base_rate = units.rate_mbit("rate", rate) if rate is not None else None
        rate_c = units.rate_mbit("rate_c2s", rate_c2s) if rate_c2s is not None else base_rate
        rate_s = units.rate_mbit("rate_s2c", rate_s2c) if rate_s2c is not None else base_rate

        common = {}
        if queue is not None:
            common["queue_packets"] = units.integer("queue", queue, minimum=1, maximum=QUEUE_MAX)
        if queue_bytes is not None:
            common["queue_bytes"] = units.size_bytes("queue_bytes", queue_bytes, minimum=1)
        if overhead is not None:
            common["overhead_bytes"] = units.integer("overhead", overhead, minimum=0, maximum=65535)
        if aqm is not None:
            common["aqm"] = Aqm.parse(aqm, "aqm")
        trace_c = traces.canonical(trace_up, "up", field_name="trace_up") if trace_up is not None else None
        trace_s = traces.canonical(trace_down, "down", field_name="trace_down") if trace_down is not None else None
        for name, t in (("trace_up", trace_c), ("trace_down", trace_s)):
            if t is not None:
                traces.info(t, field_name=name)
        box = Middlebox.parse(middlebox, "middlebox") if middlebox is not None else None
        c2s = Direction(c2s_delay, jitter_ms, loss_c, rate_c, reorder=bool(reorder), trace=trace_c, middlebox=box,
                        **common)
        s2c = Direction(s2c_delay, jitter_ms, loss_s, rate_s, reorder=bool(reorder), trace=trace_s, **common)
        kw = {}
        if mtu is not None:
            kw["mtu"] = units.integer("mtu", mtu, minimum=MTU_MIN, maximum=MTU_MAX)
        if seed is not None:
            kw["seed"] = units.integer("seed", seed, minimum=0, maximum=SEED_MAX)
        return cls(c2s, s2c, **kw)


def parse_gemodel(field_name: str, text) -> Loss:
    """'P[,R[,1-H[,1-K]]]' (each a percentage or fraction), netem's `loss gemodel` arguments."""
    parts = [p for p in re.split(r"[,\s]+", str(text).strip()) if p]
    if not 1 <= len(parts) <= 4:
        raise BadInput(field_name, f"{text!r} must be P[,R[,1-H[,1-K]]] like 1%,30%,100%,0%")
    values = [units.probability(field_name, p) for p in parts]
    return Loss.gemodel(*values)


def congctl_name(field_name: str, value) -> str:
    """A TCP congestion control's name as the kernel spells them (reno, cubic, bbr …)."""
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9_]{1,15}", value):
        raise BadInput(field_name, f"{value!r} is not a congestion control name (e.g. reno, cubic, bbr)")
    return value


@dataclass(frozen=True)
class TcpKnobs:
    """TCP settings applied per route in both namespaces (None = kernel default)."""

    initcwnd: int | None = None
    initrwnd: int | None = None
    congctl: str | None = None

    def __post_init__(self):
        for name in ("initcwnd", "initrwnd"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or not 1 <= v <= 1024):
                raise BadInput(name, f"{v!r} must be a whole number of segments in 1..1024")
        if self.congctl is not None:
            congctl_name("congctl", self.congctl)

    @classmethod
    def parse(cls, *, initcwnd=None, initrwnd=None, congctl=None) -> "TcpKnobs":
        return cls(units.integer("initcwnd", initcwnd, minimum=1, maximum=1024) if initcwnd is not None else None,
                   units.integer("initrwnd", initrwnd, minimum=1, maximum=1024) if initrwnd is not None else None,
                   congctl)

    def route_args(self) -> list[str]:
        """Arguments for `ip route replace ...`."""
        args = []
        if self.initcwnd is not None:
            args += ["initcwnd", str(self.initcwnd)]
        if self.initrwnd is not None:
            args += ["initrwnd", str(self.initrwnd)]
        if self.congctl is not None:
            args += ["congctl", self.congctl]
        return args

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _pct(p: float) -> str:
    return f"{p * 100:.6g}%"
