"""Kafka consumer groups: the group coordinator and durable committed offsets.

``coordinator`` holds the state machine (GroupCoordinator), ``offsets`` the internal
compacted offsets log (OffsetsLog, the single-node OffsetStore), ``consumer_protocol``
the codec of the consumer protocol's subscription and assignment bytes, ``types`` the
values they exchange and ``config`` the broker settings (GroupConfig).
"""
