"""The testbed's own axes: the link's MTU and TCP's knobs per route (initial windows, congestion control).

They shape the emulated path, so a spec with targets (a real path) refuses them (Axis.path).
"""

import dataclasses

from pqbench import units
from pqbench.axis import ALWAYS, Axis, register
from pqbench.testbed.linkspec import congctl_name
from pqbench.testbed.middlebox import ACTIONS, Middlebox

DEFAULT_MTU = 1500
NO_MIDDLEBOX = "none"


def _middlebox(field: str, value) -> str | None:
    """A middlebox spec in its canonical text ("none": no middlebox, the default)."""
    return None if value == NO_MIDDLEBOX else Middlebox.parse(value, field).to_text()


def _with_middlebox(value: str, link):
    """The link with the middlebox in front of it, client -> server."""
    return link.replace(client_to_server=dataclasses.replace(link.client_to_server, middlebox=Middlebox.parse(value)))

register(
    Axis("mtu", lambda field, v: units.integer(field, v, minimum=576, maximum=65535), "MTUs", default=DEFAULT_MTU,
         sql="INTEGER", id_omit=ALWAYS, path=True, order=20,
         label=lambda v, row, short: f"MTU {v}" if v != DEFAULT_MTU else None),
    Axis("initcwnd", lambda field, v: units.integer(field, v, minimum=1, maximum=1000), "segments", sql="INTEGER",
         id_omit=ALWAYS, path=True, to_tcp=lambda v: {"initcwnd": v}, order=21,
         label=lambda v, row, short: f"{'cwnd' if short else 'initcwnd'} {v}"),
    # the initial receive window both ends advertise (None: the kernel's), as `handshake --initrwnd` sets it
    Axis("initrwnd", lambda field, v: units.integer(field, v, minimum=1, maximum=1024), "segments", sql="INTEGER",
         path=True, to_tcp=lambda v: {"initrwnd": v}, order=21,
         label=lambda v, row, short: f"{'rwnd' if short else 'initrwnd'} {v}"),
    # None: the host's default, recorded per cell either way (and left out of the id, as before the axis)
    Axis("congctl", congctl_name, "congestion control names", path=True, to_tcp=lambda v: {"congctl": v},
         order=22, label=lambda v, row, short: v),
    # an ossified middlebox (pqbench.testbed.middlebox, pqlink only) as a spec sweeps it: the --middlebox option's
    # spec, or "none"; its cells share the link's seed with those without (a lost packet is paired)
    Axis("middlebox", _middlebox, f"middlebox specs ({NO_MIDDLEBOX}, {', '.join(ACTIONS)}, with split=, max=, to=)",
         path=True, to_link=_with_middlebox, order=23, label=lambda v, row, short: f"middlebox {v}" if v else None),
)
