"""The registry's own listener (``schema_registry_listen``, default 127.0.0.1:8081 as
Confluent's and Redpanda's): the API at its root with /docs, the HTTP listener's TLS
(api.server passes the same uvicorn options) and authentication (basic / bearer as
``--rest-auth`` sets it), and the peer client's TLS context for forwarded requests."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from fastapi import FastAPI

from api.rest.docs import add_docs
from api.schema_registry.routes import StoreGetter, registry_router
from api.security.basic_auth import BasicAuthMiddleware
from broker.security.tls import load_identity
from broker.security.tokens import TokenStore, tokens_path

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.config import BrokerConfig

DESCRIPTION = """Confluent Schema Registry's REST API (subjects, versions, schemas by id,
references, compatibility levels and tests, modes, soft and permanent deletes) over the
replicated ``_schemas`` topic. Every broker answers; writes go to the leader of
``_schemas-0``. See docs/schema-registry.md."""


def create_registry_app(broker: Broker, get_store: StoreGetter) -> FastAPI:
    app = FastAPI(title="Strata Schema Registry", description=DESCRIPTION, docs_url=None, redoc_url=None)
    add_docs(app)
    app.include_router(registry_router(get_store, broker))
    sasl = broker.config.sasl
    if sasl.rest_basic_auth or sasl.rest_bearer_auth:
        app.add_middleware(
            BasicAuthMiddleware,
            users=broker.users if sasl.rest_basic_auth else None,
            tokens=TokenStore(tokens_path(broker.config.data_dir)) if sasl.rest_bearer_auth else None,
        )
    return app


def peer_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The client context forwarded requests use (api.rest.peers' rule: TLS when the HTTP
    listener has it, the configured CA checks the peer, our certificate for mutual TLS)."""
    tls = config.tls
    if not (tls.enabled and tls.cert is not None and tls.key is not None):
        return None
    ctx = ssl.create_default_context(cafile=str(tls.ca) if tls.ca is not None else None)
    load_identity(ctx, tls.cert, tls.key)
    return ctx
