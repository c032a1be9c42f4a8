"""The client library: a small blocking Kafka client over our own codec (kwire).

Used by the CLI, Spark (spark/) and tools; the broker's replica fetcher uses its SASL
half (kclient.sasl). It imports only kwire, hot and core (the import-linter
contract "client" in pyproject.toml), never the server.

* ``kafka_client``  ``KafkaClient``: connect (TLS, SASL), negotiate versions, admin calls
* ``security``      ``ClientSecurity``: librdkafka-named TLS/SASL settings, the SASL
                    mechanism names, ``read_properties``
* ``sasl``          the asyncio SASL exchange for broker-to-broker links
* ``scram``         pure SCRAM (RFC 5802/7677): the client half and what the server shares
* ``lag``           a partition's consumer lag, as Kafka's tools compute it
* ``topic_admin``   IncrementalAlterConfigs, CreatePartitions, DeleteRecords (at each
                    leader), and a cluster's health from Metadata (``strata topic``,
                    ``strata cluster health|info``)
"""

from typing import TYPE_CHECKING, Any

from kclient.security import ClientSecurity, read_properties

if TYPE_CHECKING:
    from kclient.kafka_client import KafkaClient


def __getattr__(name: str) -> Any:
    # KafkaClient pulls in the whole wire codec (every API's compiled schema, ~0.25 s):
    # loaded on first use, so that Spark's option parsing and `strata -h` do not pay it.
    if name == "KafkaClient":
        from kclient.kafka_client import KafkaClient

        return KafkaClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ClientSecurity", "KafkaClient", "read_properties"]
