"""The axes as command-line options (pqbench.commands.axis_options): every registered axis is an option of
`handshake` and, where it asks nothing of the client, of `load`, from its record alone; the options that were
written by hand before keep their names and their checks; the single-cell commands build the Cell a spec does
(pqbench.measure.single.cell_of), and their configuration's JSON keeps its keys and values (compared against the
commit before, for six `handshake` and two `ssh` command lines)."""

import pytest

from pqbench import axis
from pqbench.cli import build_parser
from pqbench.commands import axis_options, handshake
from pqbench.errors import BadInput
from pqbench.experiment import axes as registry
from pqbench.measure import single

BASE = ["handshake", "--kex", "X25519", "--sig", "ecdsap256"]


def _knob(field, value):
    if not isinstance(value, int) or not 1 <= value <= 9:
        raise BadInput(field, f"{value!r} is not a knob setting (1..9)")
    return value


# Two axes registered here alone: one the client takes (a timing client's option), one only the server's site.
CLIENT_KNOB = axis.Axis("toy_knob", _knob, "knob settings 1..9", sql="INTEGER", client_feature="toy_knob",
                        client_option="--toy-knob", help="a toy's knob (1..9)")
SERVER_DIAL = axis.Axis("toy_dial", lambda field, v: str(v), "dial names", site=True, server_feature="toy_dial")


# Registered here alone: an axis of the protocols whose clients offer key shares (TLS's ClientHello), and one of
# every protocol.
SHARES_TOY = axis.Axis("toy_shares", lambda field, v: str(v), "share names", protocols=lambda p: p.key_shares)
EVERY_TOY = axis.Axis("toy_every", lambda field, v: str(v), "anything")


@pytest.fixture
def toys():
    axis.register(CLIENT_KNOB, SERVER_DIAL)
    try:
        yield
    finally:
        axis.unregister(CLIENT_KNOB.name)
        axis.unregister(SERVER_DIAL.name)


def _options(command: str) -> set[str]:
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == command)[1]
    return {o for action in sub._actions for o in action.option_strings}


def test_a_toy_axis_becomes_an_option_of_handshake_and_load_from_its_record_alone(toys):
    assert {"--toy-knob", "--toy-dial"} <= _options("handshake")
    assert "--toy-dial" in _options("load") and "--toy-knob" not in _options("load")  # load's client: a generator
    cell, options = handshake.config_from_args(build_parser().parse_args(BASE + ["--toy-knob", "7", "--toy-dial", "north"]))
    assert (cell.toy_knob, cell.toy_dial) == (7, "north")
    assert single.config_json(cell, options)["axes"] == {"toy_knob": 7, "toy_dial": "north"}
    with pytest.raises(BadInput) as e:
        handshake.config_from_args(build_parser().parse_args(BASE + ["--toy-knob", "12"]))
    assert e.value.field == "--toy-knob" and "not a knob setting" in str(e.value)
    args = build_parser().parse_args(["load", "--kex", "X25519", "--sig", "ecdsap256", "--toy-dial", "south"])
    assert axis_options.values(args, timing_client=False) == {"toy_dial": "south"}


def test_every_axis_but_the_paths_is_an_option_of_handshake():
    """(The path's axes are the link's options, on every command with a link.)"""
    options = _options("handshake")
    missing = [a.name for a in registry.registered() if not a.path and a.command_option not in options]
    assert missing == list(handshake.OWN_AXES)  # compression: --cert-compression and --server-compression


# What `handshake --json` printed as its configuration for these command lines before the options came from
# the registry: the same keys, and these values.
BEFORE_KEYS = ['backend', 'cert_compression', 'chain', 'chain_bytes', 'client', 'compress_certs', 'emulator',
               'initial_size', 'kex', 'max_bias', 'max_parallel', 'mode', 'n', 'netns', 'offer', 'pad', 'page',
               'parallel', 'protocol', 'quic_retry', 'rate', 'requests', 'server', 'server_groups', 'sig', 'spec',
               'stack', 'target', 'tcp', 'timeout_ms', 'transport', 'warmup', 'workers']
BEFORE = [
    ([], {"transport": "tcp", "quic_retry": False, "initial_size": None, "pad": 0, "offer": None,
          "server_groups": None, "chain": None, "chain_bytes": None, "cert_compression": "none",
          "compress_certs": False}),
    (["--transport", "quic", "--initial-size", "1300", "--quic-retry", "--pad", "100"],
     {"transport": "quic", "quic_retry": True, "initial_size": 1300, "pad": 100}),
    (["--offer", "X25519MLKEM768+X25519", "--server-groups", "X25519MLKEM768/X25519", "--chain", "webpki"],
     {"offer": "X25519MLKEM768+X25519", "server_groups": "X25519MLKEM768/X25519", "chain": "webpki"}),
    (["--chain-bytes", "14k", "--cert-compression", "zlib"],
     {"chain": None, "chain_bytes": 14000, "cert_compression": "zlib", "compress_certs": True}),
]


@pytest.mark.parametrize("argv,values", BEFORE, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_handshake_s_configuration_json_is_as_before(argv, values):
    d = single.config_json(*handshake.config_from_args(build_parser().parse_args(BASE + argv)))
    assert sorted(d) == BEFORE_KEYS
    assert {k: d[k] for k in values} == values


def test_ssh_s_configuration_json_is_as_before():
    from pqbench.commands import ssh
    argv = ["ssh", "--kex", "mlkem768x25519-sha256", "--hostkey", "ssh-mldsa-44", "--rtt", "20ms"]
    d = single.config_json(*ssh.config_from_args(build_parser().parse_args(argv)))
    assert sorted(d) == BEFORE_KEYS
    assert {k: d[k] for k in ("kex", "sig", "protocol", "server", "client", "stack", "transport", "pad")} == \
        {"kex": "mlkem768x25519-sha256", "sig": "ssh-mldsa-44", "protocol": "ssh", "server": "gossh", "client": "gossh",
         "stack": "gossh", "transport": "tcp", "pad": 0}
    assert d["spec"]["rtt_ms"] == 20


@pytest.mark.parametrize("argv,field", [
    (["--pad", "-100"], "--pad"), (["--initial-size", "abc"], "--initial-size"), (["--chain", "bogus"], "--chain"),
    (["--chain", "webpki", "--chain-bytes", "3k"], "--chain-bytes"), (["--transport", "udp"], "--transport"),
    (["--offer", "nonsense-group"], "--offer")])
def test_a_bad_axis_option_names_itself(argv, field):
    with pytest.raises(BadInput) as e:
        handshake.config_from_args(build_parser().parse_args(BASE + argv))
    assert e.value.field == field


def test_an_axis_value_the_cell_cannot_take_is_refused_before_anything_is_built():
    with pytest.raises(BadInput) as e:
        single.one_cell("X25519", "ecdsap256", transport="quic", http="2")
    assert e.value.field == "--http" and "TCP cells" in str(e.value)


@pytest.fixture
def protocol_toys():
    axis.register(SHARES_TOY, EVERY_TOY)
    try:
        yield
    finally:
        axis.unregister(SHARES_TOY.name)
        axis.unregister(EVERY_TOY.name)


def test_an_axis_is_an_option_of_the_commands_of_the_protocols_its_record_names(protocol_toys):
    assert {"--toy-shares", "--toy-every"} <= _options("handshake")  # a command of every protocol
    ssh_options = _options("ssh")
    assert "--toy-every" in ssh_options and "--toy-shares" not in ssh_options
    # SSH's clients offer no key shares and its servers send host keys: none of TLS's ClientHello or chain axes
    assert not {"--pad", "--offer", "--server-groups", "--chain", "--chain-bytes", "--sized-as", "--http",
                "--webpage", "--quic-retry", "--initial-size"} & ssh_options
    from pqbench.commands import ssh
    argv = ["ssh", "--kex", "mlkem768x25519-sha256", "--hostkey", "ssh-ed25519", "--toy-every", "x"]
    cell, _ = ssh.config_from_args(build_parser().parse_args(argv))
    assert cell.toy_every == "x" and cell.protocol == "ssh"


def test_an_axis_of_another_protocol_is_refused_naming_its_option_and_its_protocols():
    with pytest.raises(BadInput) as e:
        handshake.config_from_args(build_parser().parse_args(
            ["handshake", "--protocol", "ssh", "--kex", "curve25519-sha256", "--sig", "ssh-ed25519", "--pad", "100"]))
    assert e.value.field == "--pad" and "applies to TLS and DTLS only" in str(e.value)


def test_a_spec_s_axis_applies_to_the_cells_of_its_protocols_alone():
    from pqbench.experiment import cells as cellmod
    from pqbench.experiment.spec import parse
    head = 'name = "t"\n[axes]\nkex = ["X25519"]\nrtt = ["10ms"]\nloss = ["0%"]\n'
    with pytest.raises(BadInput) as e:
        parse(head + 'protocol = "ssh"\nsig = ["ssh-ed25519"]\npad = [0, 100]\n')
    assert e.value.field == "axes.pad" and "applies to TLS and DTLS only" in str(e.value)
    spec = parse(head + 'protocol = ["tls", "ssh"]\nsig = ["ed25519"]\npad = [0, 100]\n'
                                  'chain = ["plain", "webpki"]\n')
    got = cellmod.expand(spec)
    tls = [c for c in got if c.protocol == "tls"]
    ssh = [c for c in got if c.protocol == "ssh"]
    assert len(tls) == 4 and {(c.pad, c.chain) for c in ssh} == {(0, None)} and len(ssh) == 1
