"""Kafka REST Proxy v2 consumer instances: group members that live inside the broker.

``instances`` holds the logic (membership, positions, fetching, committing, expiry),
``assignors`` the server-side range/roundrobin/cooperative-sticky assignors an instance runs when it leads
its group. The HTTP routes are in api.rest.consumers.
"""

from api.rest_consumers.instances import (
    ConsumedRecord,
    ConsumerInstance,
    ConsumerInstanceExistsError,
    ConsumerInstanceNotFoundError,
    ConsumerInstances,
    ConsumerInstancesConfig,
    InstanceSettings,
)

__all__ = [
    "ConsumedRecord",
    "ConsumerInstance",
    "ConsumerInstanceExistsError",
    "ConsumerInstanceNotFoundError",
    "ConsumerInstances",
    "ConsumerInstancesConfig",
    "InstanceSettings",
]
