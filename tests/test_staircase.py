"""The byte staircase (pqbench.analysis.staircase): its steps move with TCP's initial window and QUIC's 3× budget
as the lower-bound model says, and the headroom is the bytes left before the next step."""

import pytest

from pqbench.analysis import model
from pqbench.analysis import staircase as st


@pytest.mark.parametrize("initcwnd", [10, 32])
def test_tcp_steps_are_the_models_and_scale_with_the_initial_window(initcwnd):
    cond = st.Condition(31.1, initcwnd)
    mss = 1500 - model.IP_TCP_HEADER
    steps = st.thresholds(cond, 120_000)
    assert steps[:2] == st.tcp_thresholds(initcwnd, mss, 2) == [initcwnd * mss, 3 * initcwnd * mss]
    for k, t in enumerate(steps[:2]):
        assert st.extra_round_trips(cond, t) == k and st.extra_round_trips(cond, t + 1) == k + 1
        # one byte more costs one round trip in the model's own timeline
        flights = [model.Flights(client_hello=1400, server_flight=f) for f in (t, t + 1)]
        times = [model.lower_bound(cond.link(), f, model.Crypto()).total_ms for f in flights]
        assert times[1] - times[0] == pytest.approx(31.1, abs=0.5)


def test_a_larger_initial_window_and_a_smaller_mtu_move_the_steps():
    ten, thirty_two = st.thresholds(st.Condition(31.1, 10))[0], st.thresholds(st.Condition(31.1, 32))[0]
    assert thirty_two == ten * 32 // 10
    assert st.thresholds(st.Condition(31.1, 10, mtu=1280))[0] == 10 * (1280 - model.IP_TCP_HEADER)


def test_quic_steps_at_the_amplification_budget_which_grows_with_the_clients_initial_bytes():
    per = model.QUIC_DATAGRAM - model.QUIC_PACKET_OVERHEAD
    one = st.Condition(31.1, transport="quic", client_hello=1000)  # one Initial datagram: 3 × 1200 bytes back
    two = st.Condition(31.1, transport="quic", client_hello=1400)  # two: twice the budget
    assert st.thresholds(one)[0] == 3 * per and st.thresholds(two)[0] == 6 * per
    assert st.extra_round_trips(two, 6 * per) == 0 and st.extra_round_trips(two, 6 * per + 1) == 1
    assert st.extra_round_trips(two, 50_000) == 1  # past the budget the model knows no further step
    assert st.headroom(two, 6 * per - 100) == 100 and st.headroom(two, 50_000) is None
    bigger = st.Condition(31.1, transport="quic", client_hello=1000, initial_size=1400)
    assert st.quic_budget_bytes(bigger) == (3 * 1400 // model.QUIC_DATAGRAM) * per
    # the model's own QUIC timeline steps at the same place
    flights = [model.Flights(client_hello=1400, server_flight=f) for f in (6 * per, 6 * per + 1)]
    times = [model.lower_bound(two.link(), f, model.Crypto(), transport="quic").total_ms for f in flights]
    assert times[1] - times[0] == pytest.approx(31.1, abs=1.0)
    # TCP's initial window does not move QUIC's steps
    assert st.thresholds(st.Condition(31.1, 32, transport="quic", client_hello=1000)) == st.thresholds(one)


def test_headroom_is_what_fits_before_the_next_step():
    cond = st.Condition(31.1, 10)
    assert st.headroom(cond, 10_000) == 14480 - 10_000
    assert st.headroom(cond, 14_481) == 43440 - 14_481
    assert st.predicted_ms(cond, 20_000, 60.0) == pytest.approx(91.1)


def test_a_measured_sweep_steps_where_its_floor_rises_by_more_than_a_quarter_round_trip():
    sizes = [1000, 2000, 3000, 4000, 5000, 6000]
    assert st.step_at(sizes, [62.0, 62.5, 63.0, 94.0, 94.3, 95.0], 31.1) == [(3000, 4000)]
    assert st.step_at(sizes, [62.0, 90.0, 63.0, 64.0, 64.3, 64.5], 31.1) == []  # one slow median is no step
    assert st.step_at(sizes, [94.0, 100.0, 106.0, 118.0, 119.0, 119.5], 31.1) == [(3000, 4000)]  # 12 ms: a step
    assert st.off_by((3000, 4000), 3500) == 0 and st.off_by((3000, 4000), 4100) == 101
    assert st.off_by((3000, 4000), 2800) == 200
