"""The worker-count controller, on a simulated machine (no root, no testbed)."""

import pytest

from pqbench.measure import concurrency


def test_cpu_load_target_lets_long_links_load_the_machine_and_short_ones_not():
    short = concurrency.cpu_load_target(0.02, clean_ms=12.9, cpu_ms=2.2)   # 5.4 ms RTT
    long = concurrency.cpu_load_target(0.02, clean_ms=393, cpu_ms=2.2)     # 195.5 ms RTT
    assert short == pytest.approx(0.105, abs=0.005)
    assert long > 0.75
    # the bound holds: expected CPU wait cpu × load / (1 - load) is max_bias of the handshake
    for typical in (3.0, 12.9, 64, 393):
        t = concurrency.cpu_load_target(0.05, typical, 3.0)
        assert 3.0 * t / (1 - t) == pytest.approx(0.05 * typical)


class SimulatedMachine:
    """Workers that each take `duration_s` per handshake and `cpu_s` of CPU in it, on CPUS cores;
    the clock advances one controller look at a time. Their TCP connects take the RTT plus the
    waiting for a CPU that the single-queue model predicts at the load they make (cpu × load / (1 -
    load), a third of it at the connect), unless `wait_ms` says otherwise."""

    def __init__(self, monkeypatch, duration_s, cpu_s, median_s=None, rtt_ms=0.0, wait_ms=None, tail_share=None,
                 tail_ms=4.0, late_share=None):
        self.t, self.busy, self.started, self.duration_s, self.cpu_s = 100.0, 0.0, 0.0, duration_s, cpu_s
        self.median_ms = (median_s or duration_s) * 1000
        self.rtt_ms, self.wait_ms, self.samples = rtt_ms, wait_ms, []
        self.tail_share, self.tail_ms = tail_share, tail_ms  # workers -> share of connects delayed by tail_ms
        self.late_share = late_share  # workers -> share of handshakes delayed by tail_ms after their connect
        monkeypatch.setattr(concurrency.time, "monotonic", lambda: self.t)

    def look(self):
        return None, self.busy  # load per look is not used for decisions

    def cpu_load(self, workers):
        return min(0.99, workers * self.cpu_s / self.duration_s / concurrency.CPUS)

    def modelled_wait_ms(self, workers):
        load = self.cpu_load(workers)
        return self.cpu_s * 1000 * load / (1 - load)

    def step(self, workers):
        dt = concurrency.LOOK_S
        self.t += dt
        self.busy += workers * dt / self.duration_s * self.cpu_s
        before = int(self.started)
        self.started += workers * dt / self.duration_s
        wait = self.wait_ms(workers) if self.wait_ms else self.modelled_wait_ms(workers)
        for _ in range(int(self.started) - before):
            share = self.tail_share(workers) if self.tail_share else 0.0
            late = share and len(self.samples) % round(1 / share) == 0  # every (1/share)-th connect waits
            connect = self.rtt_ms + 0.05 + wait / concurrency.WAITS + (self.tail_ms if late else 0.0)
            hs_share = self.late_share(workers) if self.late_share else 0.0
            hs_late = hs_share and len(self.samples) % round(1 / hs_share) == 1  # the server or client waited
            done = self.median_ms + (self.tail_ms if hs_late else 0.0)
            self.samples.append({"ok": True, "t_ns": {"tcp_connected": int(connect * 1e6),
                                                      "handshake_done": int(done * 1e6)}})

    def run(self, control, looks=40, workers=None):
        workers = workers or control.start
        for _ in range(looks):
            self.step(workers)
            done = int(self.started)
            workers += control.more(workers, done + workers, self.samples)
        return workers


def test_auto_keeps_one_worker_where_the_crypto_would_queue(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.013, cpu_s=0.0022)  # 5.4 ms RTT, clean
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=10.7, rtt_ms=5.4, meter=machine)
    assert machine.run(control) == 1


def test_auto_grows_to_the_maximum_on_a_long_link(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.4, cpu_s=0.0022)  # 195.5 ms RTT
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=391, meter=machine)
    assert machine.run(control, looks=600) == 128
    assert control.summary()["workers"] == 128


def test_auto_settles_where_the_load_meets_the_target(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.064, cpu_s=0.0022)  # 31 ms RTT
    control = concurrency.Auto(max_bias=0.02, maximum=256, network_ms=62, meter=machine)
    workers = machine.run(control, looks=80)
    target = concurrency.cpu_load_target(0.02, 64, 2.2)
    load = workers * 0.0022 / 0.064 / concurrency.CPUS
    assert target * 0.8 <= load <= target  # close under the target, never over it


def test_auto_bounds_the_wait_by_the_clean_time_even_when_loss_makes_the_median_five_times_longer(monkeypatch):
    """A lossy cell at 30.9 ms RTT: handshakes take 64 ms when clean, but retransmission timeouts make
    the median 320 ms. The CPU wait a clean handshake meets must stay under max_bias of 64 ms, not of
    320 ms: the median must not license more load."""
    lossy = SimulatedMachine(monkeypatch, duration_s=0.32, cpu_s=0.0022, median_s=0.32, rtt_ms=30.9)
    control = concurrency.Auto(max_bias=0.02, maximum=256, network_ms=61.8, rtt_ms=30.9, meter=lossy)
    workers = lossy.run(control, looks=120)
    assert lossy.modelled_wait_ms(workers) <= 0.02 * 64.0
    assert control.summary()["clean_ms"] == pytest.approx(61.8 + 2.2, abs=0.1)


def test_auto_stops_growing_when_the_measured_cpu_wait_exceeds_the_bound(monkeypatch):
    """The machine queues worse than the model says (here 4× worse): the TCP connect times show it,
    and Auto holds the workers where the measured wait reaches max_bias of the clean time."""
    worse = lambda self_workers: 4 * machine.modelled_wait_ms(self_workers)  # noqa: E731
    machine = SimulatedMachine(monkeypatch, duration_s=0.064, cpu_s=0.0022, rtt_ms=30.9, wait_ms=worse)
    control = concurrency.Auto(max_bias=0.02, maximum=256, network_ms=61.8, rtt_ms=30.9, meter=machine)
    workers = machine.run(control, looks=120)
    model_only = concurrency.cpu_load_target(0.02, 64, 2.2) * concurrency.CPUS * 0.064 / 0.0022
    assert workers < model_only * 0.8  # held back below where the model alone would have gone
    assert worse(workers / 2) <= 0.02 * 64 * 1.5  # and not far past the bound: each step at most doubles
    assert control.summary()["held"] > 0


def test_a_shared_budget_holds_every_lane_to_the_strictest_target(monkeypatch):
    """Two cells at once: a short-link cell (target low) and a long-link cell. With one budget, the
    long-link cell may not load the machine beyond the short cell's target while both run."""
    budget = concurrency.Budget()
    short = concurrency.cpu_load_target(0.02, 12.9, 2.2)
    long = concurrency.cpu_load_target(0.02, 393, 2.2)
    a, b = object(), object()
    assert budget.target(a, short) == short
    assert budget.target(b, long) == short  # the long cell gets the short cell's bound
    budget.leave(a)
    assert budget.target(b, long) == long  # and its own once the short cell is done


def test_auto_with_a_budget_shares_the_machine_with_another_lane(monkeypatch):
    machine = SimulatedMachine(monkeypatch, duration_s=0.4, cpu_s=0.0022, rtt_ms=195.5)
    budget = concurrency.Budget()
    strict = object()
    budget.target(strict, concurrency.cpu_load_target(0.02, 12.9, 2.2))  # another lane's short cell is running
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=391, rtt_ms=195.5, meter=machine, budget=budget)
    workers = machine.run(control)
    assert machine.cpu_load(workers) <= concurrency.cpu_load_target(0.02, 12.9, 2.2)
    control.finish()
    budget.leave(strict)
    assert machine.run(control, looks=600, workers=workers) == 128


def test_auto_forgets_a_burst_of_someone_elses_load(monkeypatch):
    """Two seconds of a fully busy machine at the start of a long-link cell hold the workers back
    only until they leave the estimate's window."""
    machine = SimulatedMachine(monkeypatch, duration_s=0.4, cpu_s=0.0022)
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=391, meter=machine)
    workers = control.start
    for look in range(8):  # 2 s: the machine is saturated by another program
        machine.step(workers)
        machine.busy += concurrency.LOOK_S * concurrency.CPUS
        workers += control.more(workers, int(machine.started) + workers, machine.samples)
    held_back = workers
    assert held_back < 8 and machine.run(control, looks=600, workers=held_back) == 128


def test_auto_stops_growing_when_a_tail_of_connects_waits_milliseconds(monkeypatch):
    """The mean wait stays small, but beyond 12 workers one connect in 20 waits 4 ms for a CPU (what
    a lossy 30.9 ms cell on this machine showed): Auto holds near 12 instead of growing to 100+."""
    machine = SimulatedMachine(monkeypatch, duration_s=0.32, cpu_s=0.0022, rtt_ms=30.9,
                               wait_ms=lambda w: 0.0, tail_share=lambda w: 0.05 if w > 12 else 0.0)
    control = concurrency.Auto(max_bias=0.02, maximum=256, network_ms=61.8, rtt_ms=30.9, meter=machine)
    workers = machine.run(control, looks=600)
    assert workers <= 12 * (1 + concurrency.STEP) and control.summary()["held"] > 0
    assert control.summary()["late_connects"] > concurrency.LATE_CONNECT_SHARE


def test_auto_stops_growing_when_whole_handshakes_come_late_though_connects_do_not(monkeypatch):
    """Connects stay on time, but beyond 12 workers one handshake in 20 ends 10 ms late (a server or a
    client that waited for a CPU after the connect, as the wire record of a lossy 30.9 ms cell showed;
    the simulated handshakes take 320 ms, so the margin is 2 % of that + 0.5 ms): Auto holds near 12."""
    machine = SimulatedMachine(monkeypatch, duration_s=0.32, cpu_s=0.0022, rtt_ms=30.9, tail_ms=10.0,
                               wait_ms=lambda w: 0.0, late_share=lambda w: 0.05 if w > 12 else 0.0)
    control = concurrency.Auto(max_bias=0.02, maximum=256, network_ms=61.8, rtt_ms=30.9, meter=machine)
    workers = machine.run(control, looks=600)
    assert workers <= 12 * (1 + concurrency.STEP) and control.summary()["held"] > 0
    assert control.summary()["late_handshakes"] > concurrency.LATE_HANDSHAKE_SHARE


def test_late_handshakes_leave_out_retransmissions_and_recoveries():
    def s(ms, retrans=0):
        return {"ok": True, "t_ns": {"handshake_done": int(ms * 1e6)}, "tcp_end": {"retransmits": retrans}}
    clean = [s(63.0 + 0.01 * k) for k in range(40)]
    recent = [s(63.1)] * 10 + [s(66.0)] * 2 + [s(300.0)] * 3 + [s(66.0, retrans=1)] * 4
    readings = concurrency.SampleReadings("handshake_done", 30.9)
    readings.read(clean)
    readings.mark()
    readings.read(clean + recent)
    late, judged = concurrency.late_handshakes(readings.clean_sorted, readings.clean_since, 30.9, 0.02)
    assert (late, judged) == (2, 12)  # the 300 ms recoveries and the client's retransmissions are not judged


def test_auto_widens_only_on_evidence_so_a_small_cell_keeps_one_worker(monkeypatch):
    """31.1 ms RTT, cheap crypto: the load model would allow many workers at once, but a step waits for
    EVIDENCE_MIN samples at the current count, so a 20-sample cell is measured by one worker alone."""
    machine = SimulatedMachine(monkeypatch, duration_s=0.064, cpu_s=0.0022)
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=62.2, rtt_ms=31.1, meter=machine)
    workers, steps = control.start, []
    while len(machine.samples) < 2 * concurrency.EVIDENCE_MIN:
        machine.step(workers)
        add = control.more(workers, int(machine.started) + workers, machine.samples)
        steps.append((len(machine.samples), add))
        workers += add
    assert [n for n, add in steps if add] and all(n >= concurrency.EVIDENCE_MIN for n, add in steps if add), steps
    # with the evidence in, it widens
    assert machine.run(control, looks=200, workers=workers) > 4
