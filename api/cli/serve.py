"""``strata serve``: start a broker on this machine (settings: flags over STRATA_*
environment variables over the --config TOML; broker.config)."""

from __future__ import annotations

import os
import sys

import click

from api.cli.common import (
    fail,
)
from hot.errors import StrataError


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML config file.")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Data directory [./strata-data].")
@click.option(
    "--processes",
    metavar="N|auto",
    help="Broker processes of this node: a count, or auto (one per available core) [1].",
)
@click.option("--worker", hidden=True, help="Internal: run as one process of a node (api.supervisor).")
@click.option("--kafka-listen", metavar="HOST:PORT", help="Kafka listener [127.0.0.1:9092].")
@click.option("--http-listen", metavar="HOST:PORT", help="HTTP listener [127.0.0.1:8080].")
@click.option("--advertised-listener", metavar="HOST:PORT", help="Address given to Kafka clients.")
@click.option(
    "--schema-registry-listen",
    metavar="HOST:PORT|none",
    help="Schema registry listener (Confluent's API) [127.0.0.1:8081]; none: off.",
)
@click.option(
    "--external-listen",
    metavar="HOST:PORT",
    help="A second Kafka listener (same security) whose clients get the external addresses.",
)
@click.option(
    "--external-advertised-listener",
    metavar="HOST:PORT",
    help="Address given to clients of --external-listen [that address].",
)
@click.option("--object-store", metavar="URL", help="Object store URL [file://<data-dir>/objects].")
@click.option(
    "--auto-create-topics/--no-auto-create-topics", default=None, help="Create unknown topics on use [off]."
)
@click.option(
    "--log-cleaner/--no-log-cleaner",
    default=None,
    help="Compact topics with cleanup.policy=compact (log.cleaner.enable) [on].",
)
@click.option("--etcd", metavar="HOST:PORT,...", help="Join the replicated cluster on this etcd.")
@click.option("--broker-id", type=int, help="Broker id [assigned through etcd in cluster mode].")
# Internal: a worker of a multi-process node, a broker of the cluster whose metadata store
# its supervisor serves on this socket (broker.store_socket) instead of etcd.
@click.option("--store-socket", metavar="PATH", hidden=True, help="The node supervisor's store socket.")
@click.option(
    "--inter-broker-listener", metavar="HOST:PORT", help="Address followers fetch from [the Kafka listener]."
)
@click.option("--tls-cert", metavar="PEM", help="TLS certificate chain: TLS on the Kafka and HTTP listeners.")
@click.option("--tls-key", metavar="PEM", help="TLS private key (with --tls-cert).")
@click.option("--tls-ca", metavar="PEM", help="CA bundle client certificates are checked against.")
@click.option(
    "--tls-client-auth", type=click.Choice(["none", "requested", "required"]), help="Mutual TLS [none]."
)
@click.option(
    "--sasl-mechanisms", metavar="MECH,...", help="SASL on the Kafka listener, e.g. SCRAM-SHA-512,PLAIN."
)
@click.option(
    "--rest-auth",
    metavar="none|basic|bearer|basic,bearer",
    help="REST authentication: basic (strata users), bearer (strata tokens) [none].",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="Log level of the broker's stderr log.",
)
def serve(
    config_file: str | None,
    data_dir: str | None,
    processes: str | None,
    worker: str | None,
    kafka_listen: str | None,
    http_listen: str | None,
    advertised_listener: str | None,
    schema_registry_listen: str | None,
    external_listen: str | None,
    external_advertised_listener: str | None,
    object_store: str | None,
    auto_create_topics: bool | None,
    log_cleaner: bool | None,
    etcd: str | None,
    broker_id: int | None,
    store_socket: str | None,
    inter_broker_listener: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_ca: str | None,
    tls_client_auth: str | None,
    sasl_mechanisms: str | None,
    rest_auth: str | None,
    log_level: str,
) -> None:
    """Start a broker on this machine.

    Settings: flags over STRATA_* environment variables over the --config TOML.
    """
    # gRPC (the etcd client) installs fork handlers that can crash a child between fork
    # and exec while other threads are in gRPC calls (a node's supervisor in cluster mode
    # starting its processes died with SIGSEGV in them): the broker never needs them, as it
    # forks only to exec. Set before gRPC is imported.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    from api.server import run
    from broker.config import load_config

    for flag, value in (
        ("--kafka-listen", kafka_listen),
        ("--http-listen", http_listen),
        ("--advertised-listener", advertised_listener),
        ("--inter-broker-listener", inter_broker_listener),
    ):
        if value is not None and "://" in value:
            fail(f"{flag}: expected HOST:PORT (no URL scheme), got {value!r}")
    try:
        rest: dict[str, object] = {}
        if rest_auth is not None:
            schemes = {x.strip().lower() for x in rest_auth.split(",") if x.strip()} - {"none"}
            if schemes - {"basic", "bearer"}:
                raise click.BadParameter(f"unknown scheme in {rest_auth!r}", param_hint="--rest-auth")
            rest = {"rest_basic_auth": "basic" in schemes, "rest_bearer_auth": "bearer" in schemes}
        config = load_config(
            config_file=config_file,
            overrides={
                "data_dir": data_dir,
                "processes": processes,
                "kafka_listen": kafka_listen,
                "http_listen": http_listen,
                "advertised_listener": advertised_listener,
                "schema_registry_listen": schema_registry_listen,
                "external_listen": external_listen,
                "external_advertised_listener": external_advertised_listener,
                "object_store": object_store,
                "auto_create_topics": auto_create_topics,
                "broker_id": broker_id,
                "cleaner": {"log.cleaner.enable": log_cleaner},
                "cluster": {
                    "etcd": etcd,
                    "metadata.store.socket": store_socket,
                    "inter.broker.listener": inter_broker_listener,
                },
                "tls": {"cert": tls_cert, "key": tls_key, "ca": tls_ca, "client_auth": tls_client_auth},
                "sasl": {"mechanisms": sasl_mechanisms, **rest},
            },
        )
        sys.exit(run(config, log_level=log_level.upper(), worker=worker, argv=sys.argv[1:]))
    except StrataError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(_os_error(exc))


def _os_error(exc: OSError) -> str:
    """One line for an OSError of startup (a listener that cannot bind names its address,
    api.server)."""
    text = exc.strerror or str(exc)
    if "cannot listen on" in text:
        flags = "--kafka-listen / --http-listen / --schema-registry-listen (none: off)"
        return f"{text} (choose another address with {flags})"
    return f"{text}{f': {exc.filename}' if exc.filename else ''}"
