"""The network testbed: two namespaces joined by one emulated link (pqlink or netem); beside it the
real path (the host's own network, measured instead of emulated). Both are a Path, what a rig runs on.

    from pqbench.testbed import LinkSpec, TcpKnobs, Testbed
    with Testbed(LinkSpec.symmetric(rtt_ms=31.1, loss=0.01)) as tb:
        tb.run("client", [...]); tb.counters()
"""

from pqbench.testbed.backend_pqlink import EmulatorOptions
from pqbench.testbed.linkspec import Aqm, Direction, LinkSpec, Loss, TcpKnobs
from pqbench.testbed.path import Path
from pqbench.testbed.realpath import RealPath
from pqbench.testbed.registry import clean
from pqbench.testbed.testbed import Testbed, TestbedInterrupted, down, running

__all__ = ["Aqm", "Direction", "EmulatorOptions", "LinkSpec", "Loss", "Path", "RealPath", "TcpKnobs", "Testbed",
           "TestbedInterrupted", "clean", "down", "running"]
