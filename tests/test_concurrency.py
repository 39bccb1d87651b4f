"""The worker-count controller, on a simulated machine (no root, no testbed)."""

import pytest

from pqbench import concurrency


def test_load_target_lets_long_links_load_the_machine_and_short_ones_not():
    short = concurrency.load_target(0.02, typical_ms=12.9, cpu_ms=2.2)   # 5.4 ms RTT
    long = concurrency.load_target(0.02, typical_ms=393, cpu_ms=2.2)     # 195.5 ms RTT
    assert short == pytest.approx(0.105, abs=0.005)
    assert long > 0.75
    # the bound holds: expected CPU wait cpu × load / (1 - load) is max_bias of the handshake
    for typical in (3.0, 12.9, 64, 393):
        t = concurrency.load_target(0.05, typical, 3.0)
        assert 3.0 * t / (1 - t) == pytest.approx(0.05 * typical)


class SimulatedMachine:
    """Workers that each take `duration_s` per handshake and `cpu_s` of CPU in it, on CPUS cores;
    the clock advances one controller look at a time."""

    def __init__(self, monkeypatch, duration_s, cpu_s, median_s=None):
        self.t, self.busy, self.started, self.duration_s, self.cpu_s = 100.0, 0.0, 0.0, duration_s, cpu_s
        self.median_ms = (median_s or duration_s) * 1000
        monkeypatch.setattr(concurrency.time, "monotonic", lambda: self.t)

    def look(self):
        return None, self.busy  # load per look is not used for decisions

    def step(self, workers):
        dt = concurrency.LOOK_S
        self.t += dt
        self.busy += workers * dt / self.duration_s * self.cpu_s
        self.started += workers * dt / self.duration_s

    def run(self, control, looks=40, workers=None):
        workers = workers or control.start
        for _ in range(looks):
            self.step(workers)
            done = int(self.started)
            workers += control.more(workers, done + workers, [self.median_ms] * done)
        return workers


def test_auto_keeps_one_worker_where_the_crypto_would_queue(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.013, cpu_s=0.0022)  # 5.4 ms RTT, clean
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=10.7, meter=machine)
    assert machine.run(control) == 1


def test_auto_grows_to_the_maximum_on_a_long_link(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.4, cpu_s=0.0022)  # 195.5 ms RTT
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=391, meter=machine)
    assert machine.run(control) == 128
    assert control.summary()["workers"] == 128


def test_auto_settles_where_the_load_meets_the_target(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.064, cpu_s=0.0022)  # 31 ms RTT
    control = concurrency.Auto(max_bias=0.02, maximum=256, network_ms=62, meter=machine)
    workers = machine.run(control, looks=80)
    target = concurrency.load_target(0.02, 64, 2.2)
    load = workers * 0.0022 / 0.064 / concurrency.CPUS
    assert target * 0.8 <= load <= target  # close under the target, never over it


def test_auto_tolerates_more_load_where_retransmissions_make_the_median_long(monkeypatch):
    """A CPU-heavy key exchange (21 ms per handshake) at 5.4 ms RTT: one worker while the median is
    the clean handshake; many once 20 % loss puts the median near a second."""
    clean = SimulatedMachine(monkeypatch, duration_s=0.047, cpu_s=0.021)
    assert clean.run(concurrency.Auto(max_bias=0.02, maximum=128, network_ms=10.7, meter=clean)) == 1
    lossy = SimulatedMachine(monkeypatch, duration_s=1.5, cpu_s=0.021, median_s=1.0)
    assert lossy.run(concurrency.Auto(max_bias=0.02, maximum=128, network_ms=10.7, meter=lossy)) >= 40


def test_auto_forgets_a_burst_of_someone_elses_load(monkeypatch):
    """Two seconds of a fully busy machine at the start of a long-link cell hold the workers back
    only until they leave the estimate's window."""
    machine = SimulatedMachine(monkeypatch, duration_s=0.4, cpu_s=0.0022)
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=391, meter=machine)
    workers = control.start
    for look in range(8):  # 2 s: the machine is saturated by another program
        machine.step(workers)
        machine.busy += concurrency.LOOK_S * concurrency.CPUS
        workers += control.more(workers, int(machine.started) + workers, [400.0] * int(machine.started))
    held_back = workers
    assert held_back < 8 and machine.run(control, looks=60, workers=held_back) == 128
