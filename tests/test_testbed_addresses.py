"""More addresses in the server namespace (origins of a page, hosts of a population), all behind the same
emulated link (root only)."""

import ipaddress
import os
import statistics
import subprocess

import pytest

from pqbench.errors import MeasurementFailed
from pqbench.testbed import LinkSpec, TcpKnobs, Testbed, netns, probe

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)"),
]


def test_extra_server_addresses_are_reached_over_the_emulated_link_with_the_route_s_knobs():
    with Testbed(LinkSpec.symmetric(20), tcp=TcpKnobs(initcwnd=7)) as tb:
        extra = tb.add_server_addresses(300)
        assert len(set(extra)) == 300 and tb.server_addrs == [tb.server_addr, *extra]
        assert all(ipaddress.ip_address(a) in tb.subnet for a in extra)
        assert not {tb.client_addr, tb.server_addr} & set(extra)
        # the last one sits past the first /24 of extras; both it and the first are 20 ms away, as the
        # server's own address is: the packets cross the emulator
        for to in (extra[0], extra[-1]):
            before = tb.counters()["client_to_server"]["packets"]
            rtts = probe.connect_rtts(tb, 5, to=to)
            assert 19.5 < statistics.median(rtts) < 40, (to, rtts)
            assert tb.counters()["client_to_server"]["packets"] - before >= 7 * 2
        # TCP's knobs ride on each route, now and after a change
        route = netns.ip("route", "show", f"{extra[-1]}/32", netns=tb.client_ns).stdout
        assert "initcwnd 7" in route, route
        tb.set_tcp(TcpKnobs(initcwnd=3))
        route = netns.ip("route", "show", f"{extra[-1]}/32", netns=tb.client_ns).stdout
        assert "initcwnd 3" in route, route
        # nothing outside the testbed's own /16 is routed
        routes = netns.ip("route", "show", netns=tb.client_ns).stdout.split("\n")
        assert all(ipaddress.ip_network(r.split()[0]).subnet_of(tb.subnet) for r in routes if r.strip())
        assert tb.record["server"]["extra_addrs"] == extra


def test_addresses_need_a_testbed_that_is_up():
    tb = Testbed(LinkSpec())
    with pytest.raises(MeasurementFailed):
        tb.add_server_addresses(1)
