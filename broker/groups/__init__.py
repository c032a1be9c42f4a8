"""Kafka consumer groups: the group coordinator and durable committed offsets.

``coordinator`` holds the façade the handlers call (GroupCoordinator), over
``membership`` (the group state machine: join, sync, heartbeat, leave, rebalances) with
``group`` (one group's state) and ``offset_manager`` (offset commit, fetch, delete,
expiry, loading and every write); ``timers`` the clock and timer heap they share.
``offsets`` holds the internal compacted offsets log (OffsetsLog, the single-node
OffsetStore), ``offsets_codec`` its records, ``consumer_protocol`` the codec of the
consumer protocol's subscription and assignment bytes, ``types`` the values they
exchange and ``config`` the broker settings (GroupConfig).
"""
