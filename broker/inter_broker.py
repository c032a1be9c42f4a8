"""Security between brokers (``security.inter.broker.protocol``): how followers connect to
leaders and what the internal listener demands of them.

* SSL / SASL_SSL: mutual TLS. The internal listener requires a client certificate signed
  by ``[tls] ca``; a follower presents its own ``[tls]`` certificate as that client
  certificate and checks the leader's against the same CA (host name included).
* SASL_PLAINTEXT / SASL_SSL: the follower authenticates as ``inter.broker.sasl.username``
  with ``sasl.mechanism.inter.broker.protocol``; that user must exist on every broker.

Without ``internal_listen`` followers use the client listener, which must then speak the
inter-broker protocol (broker.config checks).
"""

from __future__ import annotations

import dataclasses
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.config import check_inter_broker_tls
from broker.security.tls import server_context
from hot.errors import TlsError

if TYPE_CHECKING:
    from broker.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class InterBrokerClient:
    """What a follower's connection to a leader needs."""

    protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)


def client_security(config: BrokerConfig) -> InterBrokerClient | None:
    cluster = config.cluster
    if cluster is None or cluster.inter_broker_protocol == "PLAINTEXT":
        return None
    check_inter_broker_tls(config)
    ctx: ssl.SSLContext | None = None
    if cluster.inter_broker_tls:
        tls = config.tls
        assert tls.cert is not None and tls.key is not None and tls.ca is not None
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_verify_locations(cafile=tls.ca)
            ctx.load_cert_chain(tls.cert, tls.key)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"inter-broker TLS: cannot load {tls.cert} / {tls.ca}: {exc}") from None
    if not cluster.inter_broker_sasl:
        return InterBrokerClient(cluster.inter_broker_protocol, ctx)
    return InterBrokerClient(
        cluster.inter_broker_protocol,
        ctx,
        cluster.inter_broker_sasl_mechanism,
        cluster.inter_broker_sasl_username,
        cluster.inter_broker_sasl_password,
    )


def internal_listener_options(config: BrokerConfig) -> dict[str, Any]:
    """KafkaServer options of the internal (replication) listener."""
    cluster = config.cluster
    if cluster is None or cluster.inter_broker_protocol == "PLAINTEXT":
        return {}
    check_inter_broker_tls(config)
    opts: dict[str, Any] = {}
    if cluster.inter_broker_tls:
        opts["ssl_context"] = server_context(dataclasses.replace(config.tls, client_auth="required"))
    if cluster.inter_broker_sasl:
        mechs = config.sasl.mechanisms or (cluster.inter_broker_sasl_mechanism,)
        if cluster.inter_broker_sasl_mechanism not in mechs:
            mechs = (*mechs, cluster.inter_broker_sasl_mechanism)
        opts["sasl_mechanisms"] = mechs
    return opts
