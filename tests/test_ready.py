"""The one server-readiness wait every stack uses (pqbench.endpoints.ready): it returns once every port
answers, and otherwise stops the server and says which server, what it did not do and what its log says
(no root: real processes on loopback)."""

import socket
import subprocess
import sys

import pytest

from pqbench.endpoints.base import Place, Site
from pqbench.endpoints.ready import Starting, listening
from pqbench.errors import MeasurementFailed

PLACE = Place(addr="127.0.0.1", popen=subprocess.Popen, socket=socket.socket)


@pytest.fixture
def server(tmp_path):
    """A stand-in server: a process that writes its log, listens on one port and runs until stopped."""
    made = []

    def start(code: str, stderr=subprocess.DEVNULL):
        log = tmp_path / "server.log"
        proc = subprocess.Popen([sys.executable, "-c", code, str(log)], stderr=stderr)
        stopped = []
        up = Starting("toy server", proc, [log], lambda: (stopped.append(True), proc.kill(), proc.wait()))
        made.append(proc)
        return up, stopped
    yield start
    for proc in made:
        proc.kill()
        proc.wait()


def port_of(sock) -> int:
    return sock.getsockname()[1]


def test_it_polls_until_every_port_listens(server):
    up, stopped = server("import time; time.sleep(30)")
    check, polls = listening(PLACE, "127.0.0.1"), []
    with socket.socket() as a, socket.socket() as b:
        for s in (a, b):
            s.bind(("127.0.0.1", 0))
        a.listen()

        def answers(port):
            polls.append(port)
            if polls.count(port_of(b)) == 3:
                b.listen()  # b comes up late
            return check(port)
        up.wait([port_of(a), port_of(b)], answers, "listen on")
        assert (polls.count(port_of(a)), polls.count(port_of(b))) == (1, 3) and not stopped


def test_a_server_that_dies_is_reported_at_once_with_its_log(server):
    up, stopped = server("import sys; open(sys.argv[1], 'w').write('bind() failed (98: Address in use)\\n'); "
                         "sys.stderr.write('fatal: no config\\n'); sys.exit(1)", stderr=subprocess.PIPE)
    with pytest.raises(MeasurementFailed) as e:
        up.wait([4433], lambda p: "not yet", "listen on", timeout=30)
    msg = str(e.value)
    assert msg.startswith("toy server exited with 1 before it would listen on port 4433")
    assert "server.log" in msg and "Address in use" in msg and "fatal: no config" in msg and stopped


def test_a_port_that_never_answers_times_out_naming_it(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, not listening: a connect is refused
        up, stopped = server("import time; time.sleep(30)")
        with pytest.raises(MeasurementFailed) as e:
            up.wait([port_of(s)], listening(PLACE, "127.0.0.1"), "listen on", timeout=0.3)
        assert str(e.value).startswith(f"toy server did not listen on port {port_of(s)} within 0.3 s "
                                       "(no TCP connection); its log (")
    assert str(e.value).endswith("server.log): nothing") and stopped


def test_a_site_that_listens_but_cannot_serve_fails_with_the_reason(server):
    up, stopped = server("import time; time.sleep(30)")
    sites = [Site(4433, chain=None), Site(4434, chain=None)]
    with pytest.raises(MeasurementFailed) as e:
        up.serves(sites, lambda site: None if site.port == 4433 else "tls_error: handshake failure", "a TLS handshake")
    assert str(e.value).startswith("toy server on port 4434 does not complete a TLS handshake: tls_error: handshake "
                                   "failure; its log (") and stopped
