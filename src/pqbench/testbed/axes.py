"""The testbed's own axes: the link's MTU and TCP's knobs per route (initial windows, congestion control).

They shape the emulated path, so a spec with targets (a real path) refuses them (Axis.path).
"""

from pqbench import units
from pqbench.axis import ALWAYS, Axis, register
from pqbench.testbed.linkspec import congctl_name

DEFAULT_MTU = 1500

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
)
