"""An ossified middlebox in front of the emulated link (pqlink's middlebox stage, client->server): it
reads each segment's first bytes and, when a TLS ClientHello spans more than one TCP segment or its
record is longer than a size, resets the connection (turns the segment into a RST to the server, whose
answer to the client's next segment is a RST) or drops the segment and every retransmit of it (the
client meets silence), as deployed middleboxes did when post-quantum key shares made ClientHellos
larger than one segment. Or, `drop-fragments`, it drops every IPv4 fragment, whatever it carries, as firewalls
that cannot reassemble do: an IKE_SA_INIT too large for the path (IKEv2 cannot split it, RFC 7383) never arrives.

    Middlebox.parse("reset")                 # a ClientHello spanning two segments is reset
    Middlebox.parse("drop max=1400")         # ... dropped, and so is one whose record exceeds 1400 B
    Middlebox.parse("reset split=off max=1000")  # the size alone
    Middlebox.parse("reset to=10.3.1.7")     # only in front of that address (one host of a population)
    Middlebox.parse("drop-fragments")        # every IP fragment client -> server is dropped
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from pqbench import units
from pqbench.errors import BadInput

FRAGMENTS = "drop-fragments"
ACTIONS = ("reset", "drop", FRAGMENTS)
_ON, _OFF = ("on", "1", "yes", "true"), ("off", "0", "no", "false")


@dataclass(frozen=True)
class Middlebox:
    action: str = "reset"
    split: bool = True  # act on a ClientHello longer than the segment that opens it
    max_bytes: int = 0  # act on a ClientHello record longer than this; 0 = no size limit
    to: str = ""  # only in front of these destinations (an IPv4 address or network); "" = every destination

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise BadInput("middlebox", f"unknown action {self.action!r} (allowed: {', '.join(ACTIONS)})")
        if not isinstance(self.split, bool):
            raise BadInput("middlebox", f"split={self.split!r} must be on or off")
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int) or not 0 <= self.max_bytes <= 65535:
            raise BadInput("middlebox", f"max={self.max_bytes!r} must be a whole number of bytes in 0..65535")
        if self.to:
            try:
                net = ipaddress.IPv4Network(self.to)
            except ValueError:
                raise BadInput("middlebox", f"to={self.to!r} must be an IPv4 address or network (A.B.C.D or "
                                            "A.B.C.D/N)") from None
            object.__setattr__(self, "to", str(net.network_address) if net.prefixlen == 32 else str(net))
        if self.action == FRAGMENTS:
            if self.max_bytes or not self.split:
                raise BadInput("middlebox", "drop-fragments drops every IP fragment: split= and max= are the "
                                            "ClientHello rules of reset and drop")
            return
        if not self.split and not self.max_bytes:
            raise BadInput("middlebox", "split=off without max=BYTES would never act: give max or leave split on")

    @classmethod
    def parse(cls, text, field_name: str = "middlebox") -> "Middlebox":
        """'reset', 'drop', then split=on|off, max=BYTES and to=ADDRESS[/N]."""
        if isinstance(text, Middlebox):
            return text
        words = str(text).replace(",", " ").split()
        if not words or words[0].lower() not in ACTIONS:
            raise BadInput(field_name, f"{text!r}: start with an action ({', '.join(ACTIONS)}), then split=on|off, "
                                       "max=BYTES and to=ADDRESS[/N]")
        kw = {"action": words[0].lower()}
        for w in words[1:]:
            name, eq, value = w.partition("=")
            name = name.lower()
            if name == "split" and value.lower() in _ON + _OFF:
                kw["split"] = value.lower() in _ON
            elif name == "max" and eq:
                kw["max_bytes"] = units.size_bytes(field_name, value, minimum=0)
            elif name == "to" and value:
                kw["to"] = value
            else:
                raise BadInput(field_name, f"{w!r} is not split=on|off, max=BYTES or to=ADDRESS[/N]")
        try:
            return cls(**kw)
        except BadInput as e:
            raise BadInput(field_name, e.detail) from None

    def describe(self) -> str:
        if self.action == FRAGMENTS:
            return "ossified middlebox: drops every IP fragment" + (f" to {self.to}" if self.to else "")
        rules = (["a ClientHello spanning segments"] if self.split else []) + \
            ([f"a ClientHello record over {self.max_bytes} B"] if self.max_bytes else [])
        return f"ossified middlebox: {self.action}s {' or '.join(rules)}" + (f" to {self.to}" if self.to else "")

    def to_text(self) -> str:
        return " ".join([self.action, *([] if self.split or self.action == FRAGMENTS else ["split=off"]),
                         *([f"max={self.max_bytes}"] if self.max_bytes else []), *([f"to={self.to}"] if self.to else [])])

    def params(self) -> dict:
        """pqlink's key=value parameters."""
        return {"middlebox": self.action, "middlebox_split": int(self.split), "middlebox_max": self.max_bytes,
                "middlebox_to": self.to or "any"}


OFF_PARAMS = {"middlebox": "off", "middlebox_split": 1, "middlebox_max": 0, "middlebox_to": "any"}
