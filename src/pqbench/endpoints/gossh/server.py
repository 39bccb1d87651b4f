"""The `gossh` stack's server: sshserver (native/sshgo/cmd/sshserver, golang.org/x/crypto/ssh) in the
server namespace, one process per site (each with that site's host key), exactly the run's key
exchanges, the site's one host key algorithm (for a size-only key set its padded host certificate),
the site's user key authorized; "exec" answers exit 0.
Log: run_dir/gossh-server-PORT.log, one line per connection with what was negotiated."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pqbench import interrupts
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Place, Serving, stop_group
from pqbench.endpoints.gossh import build
from pqbench.endpoints.gossh.client import probe
from pqbench.endpoints.ready import Starting, listening


class GoSshServer:
    def __init__(self):
        self.procs: dict[int, subprocess.Popen] = {}
        self.serving: Serving | None = None
        self.addr = ""

    def log_path(self, port: int) -> Path:
        return self.serving.run_dir / f"gossh-server-{port}.log"

    def start(self, place: Place, serving: Serving) -> None:
        b = build.require("sshserver")
        self.serving, self.addr = serving, place.addr
        serving.run_dir.mkdir(parents=True, exist_ok=True)
        for site in serving.sites:
            keys = site.chain
            argv = [str(b), "--listen", f"{place.addr}:{site.port}", "--hostkey", str(keys.leaf_key),
                    "--hostkey-alg", sshkeys.split_hostkey(keys.sig)[0], "--kex", ",".join(serving.groups),
                    "--authorized-key", str(keys.user_pub), "--log", str(self.log_path(site.port))]
            if keys.size_only:
                argv += ["--host-cert", str(keys.host_cert)]
            with interrupts.deferred():  # a Ctrl-C as it starts is raised once stop() can find it
                self.procs[site.port] = place.popen(argv, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.PIPE, process_group=0)

    def ready(self, client_place: Place) -> None:
        """Each site's process listens, then completes one SSH connection with sshtimer (first key exchange)."""
        for site in self.serving.sites:  # a process per site
            up = Starting("sshserver", self.procs[site.port], [self.log_path(site.port)], self.stop)
            up.wait([site.port], listening(client_place, self.addr), "listen on")
            up.serves([site], lambda s: probe(client_place, self.addr, s.port, s.chain, self.serving.groups[0])[0],
                      "an SSH connection")

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_group(proc)
