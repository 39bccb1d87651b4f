"""Every axis an experiment can sweep: the features that register theirs (pqbench.axis), one line each.

Importing this module fills the registry; spec parsing, cell expansion and everything downstream then read
the axes from it. A new feature's axes: its own module calling pqbench.axis.register, and one line here.
"""

import pqbench.endpoints.offer  # noqa: F401  offer, server_groups, compress, pad
import pqbench.testbed.axes  # noqa: F401  mtu, initcwnd, congctl
import pqbench.transport  # noqa: F401  transport, quic_retry, initial_size
import pqbench.algorithms.chain_axes  # noqa: F401  chain, chain_bytes
import pqbench.endpoints.http_version  # noqa: F401  http
import pqbench.algorithms.sized_chain_axis  # noqa: F401  sized_as
import pqbench.algorithms.trust_anchors  # noqa: F401  trust_anchors
import pqbench.webpages.axis  # noqa: F401  webpage
import pqbench.udp.dtls  # noqa: F401  cookie (and the DTLS protocol)
import pqbench.udp.ike  # noqa: F401  fragment_size (and the IKEv2 protocol)
from pqbench.axis import registered  # noqa: F401  (the table, as filled by the imports above)
