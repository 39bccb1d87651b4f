"""The network testbed: two namespaces joined by one emulated link (pqlink or netem).

    from pqbench.testbed import LinkSpec, TcpKnobs, Testbed
    with Testbed(LinkSpec.symmetric(rtt_ms=31.1, loss=0.01)) as tb:
        tb.run("client", [...]); tb.counters()
"""

from pqbench.testbed.backend_pqlink import EmulatorOptions
from pqbench.testbed.linkspec import Aqm, Direction, LinkSpec, Loss, TcpKnobs
from pqbench.testbed.registry import clean
from pqbench.testbed.testbed import Testbed, TestbedInterrupted, down, running

__all__ = ["Aqm", "Direction", "EmulatorOptions", "LinkSpec", "Loss", "TcpKnobs", "Testbed", "TestbedInterrupted",
           "clean", "down", "running"]
