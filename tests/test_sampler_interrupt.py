"""A cell whose clients die of Ctrl-C: the terminal's SIGINT reaches the whole process group, so the clients die of it
at once, while `pqbench run` takes the signal when it chooses (interrupts.deferred) and sets the cell's stop event
up to a look later. Such a cell is cancelled, not stored as a cell whose every sample failed (a CI run's Ctrl-C
stress test found the stored one). A client killed so by someone else, with no stop coming, stays a recorded
failure. Real processes, no testbed: the client is a shell that signals itself."""

import subprocess
import threading

import pytest

from pqbench.endpoints.base import ClientJob, Place
from pqbench.measure import sampler


class SignalledClient:
    """A client whose every worker dies of the signal given, having timed nothing."""
    name = "signalled"
    milestones = ()

    def __init__(self, signame: str):
        self.signame = signame

    def argv(self, job, count, worker, claims):
        return ["sh", "-c", f"sleep 0.1; kill -{self.signame} $$"]

    def env(self):
        return None


PLACE = Place("127.0.0.1", lambda argv, **kw: subprocess.Popen(argv, **kw), lambda: None)
JOB = ClientJob(host="127.0.0.1", port=1, groups=["X25519"], cafile="", servername="", timeout_ms=1000)


@pytest.mark.parametrize("signame", ["INT", "TERM"])
def test_clients_that_died_of_the_runs_interrupt_cancel_the_cell(tmp_path, signame):
    stop = threading.Event()
    threading.Timer(0.6, stop.set).start()  # the run notices its signal later than the clients die of it
    with pytest.raises(sampler.Cancelled):
        sampler.run(SignalledClient(signame), JOB, 4, 2, PLACE, tmp_path, stop=stop)


def test_clients_killed_by_someone_else_are_recorded_failures(tmp_path):
    samples = sampler.run(SignalledClient("INT"), JOB, 4, 2, PLACE, tmp_path, stop=threading.Event())
    assert [s["error_class"] for s in samples] == ["client_lost"] * 4
    assert "exited with -2" in samples[0]["error"]
