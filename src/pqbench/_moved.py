"""Old module names, kept importable: scripts and notebooks written before the top level was grouped
into packages (`import pqbench.late`, `from pqbench import catalog`) get the module that now holds
the code, the very same object, so nothing is defined twice."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "catalog": "algorithms.catalog",
    "certs": "algorithms.certs",
    "crypto": "algorithms.microbench",
    "liboqs": "algorithms.liboqs",
    "stack": "algorithms.openssl_build",
    "concurrency": "measure.concurrency",
    "wire": "measure.wire",
    "late": "measure.late",
    "handshake": "analysis.single",  # its run() and HandshakeConfig, as before
    "host": "machine.host",
    "doctor": "machine.doctor",
    "condition": "experiment.condition",
    "endpoints.sampler": "measure.sampler",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self._own_spec: dict = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("pqbench.") and fullname[len("pqbench."):] in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(f"pqbench.{MOVED[spec.name[len('pqbench.'):]]}")
        self._own_spec[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # The module that holds the code has run already; the import system has just stamped the
        # old name's spec on it, so give it back its own.
        module.__spec__ = self._own_spec[module.__name__]


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
