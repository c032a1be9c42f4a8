"""What a handler sees of the connection its request came on: a Protocol that
``api.kafka_server.Connection`` satisfies, so the handlers need not import the listener
that dispatches to them (no import cycle between the listener and its handlers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from api.security.sasl import SaslSession
    from broker.broker import Broker
    from broker.produce_path import ProduceOrder
    from hot.errors import StrataError
    from kwire import RequestHeader


class Listener(Protocol):
    """The listener a connection was accepted on."""

    @property
    def external(self) -> bool: ...

    @property
    def inter_broker(self) -> bool: ...


class Connection(Protocol):
    """One client connection, as its requests' handlers use it."""

    broker: Broker
    sasl: SaslSession | None
    # Set by a SaslHandshake v0: frames are raw SASL tokens until authenticated.
    raw_sasl: RequestHeader | None
    peer: Any
    host: str
    produce_order: ProduceOrder
    # The connection's last Produce taken by the general path (its task): while it runs,
    # later ones go there too, so that they append after it (api.handlers.produce_fast).
    general_produce: asyncio.Future[Any] | None

    @property
    def server(self) -> Listener: ...

    @property
    def principal(self) -> str | None: ...

    @property
    def ever_throttled(self) -> bool: ...

    def throttle(self, ms: int) -> None: ...

    def throttled_ms(self) -> int: ...

    def authenticated(self, session: SaslSession) -> None: ...

    def authentication_failed(self, mechanism: str, user: str | None, exc: StrataError) -> None: ...
