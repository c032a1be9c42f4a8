"""Client-side security of kclient (CLI, Spark): the SCRAM client against our SCRAM
server, librdkafka-style properties, and that no password shows in a repr or an error."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hot.errors import AuthenticationError, InvalidConfigError
from kclient.scram import HASHES, ScramClient, ScramServer, make_credential
from kclient.security import ClientSecurity, read_properties

PW = "Client-pw-5e0b7c"


@pytest.mark.parametrize("mech", sorted(HASHES))
def test_scram_client_against_server(mech: str) -> None:
    cred = make_credential(HASHES[mech], PW)
    client = ScramClient(mech, "al=ice,x", PW)
    server = ScramServer(mech, lambda u: cred if u == "al=ice,x" else None)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.username == "al=ice,x"
    # a server that does not know the password cannot pass for the broker
    impostor = ScramServer(mech, lambda u: make_credential(HASHES[mech], "other"))
    c2 = ScramClient(mech, "bob", PW)
    first = impostor.first(c2.first())
    c2.final(first)
    with pytest.raises(AuthenticationError, match="signature"):
        c2.verify(b"v=" + b"AAAA" * 16)
    with pytest.raises(AuthenticationError, match="iterations"):
        ScramClient(mech, "bob", PW, nonce="abc").final(b"r=abcdef,s=AAAA,i=10")
    with pytest.raises(AuthenticationError, match="malformed"):
        ScramClient(mech, "bob", PW, nonce="abc").final(b"r=zzz,s=AAAA,i=4096")  # not our nonce


def test_properties_and_secrets(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    props = tmp_path / "c.properties"
    props.write_text(
        f"# comment\nsecurity.protocol=sasl_ssl\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=al\n"
        f"sasl.password={PW}\nssl.ca.location=/etc/ca.pem\nssl.endpoint.identification.algorithm=none\n"
    )
    sec = ClientSecurity.from_properties(read_properties(props))
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "al",
        PW,
    )
    assert sec.tls and sec.sasl and not sec.check_hostname and sec.cafile == Path("/etc/ca.pem")
    assert PW not in repr(sec)
    with pytest.raises(InvalidConfigError, match=r"needs sasl\.username and sasl\.password") as exc:
        ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.password": PW})
    assert PW not in str(exc.value)
    props.write_text(f"sasl.password {PW}\n")
    with pytest.raises(InvalidConfigError, match=r":1: expected key=value") as exc:
        read_properties(props)
    assert PW not in str(exc.value)
    with pytest.raises(InvalidConfigError, match=r"security\.protocol"):
        ClientSecurity.from_properties({"security.protocol": "SASL_PLAIN"})
    assert PW not in caplog.text
