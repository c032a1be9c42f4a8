"""Replication decisions as pure logic (no I/O, no etcd): the broker wiring calls them.

``leader_state`` is the leader's side of one partition: followers' progress, the high
watermark, ISR shrink/expand candidates and the acks=all checks. ``follower`` is the
follower's side: where to truncate after OffsetForLeaderEpoch (KIP-101 / KIP-279) and what
to do about each fetch error. The storage they act on is ``hot.log.Log`` (truncation,
leader-epoch cache, externally managed high watermark). ``reassignment`` is partition
reassignment (KIP-455): what a request makes of a replica set, and when the controller
switches to the target.
"""
