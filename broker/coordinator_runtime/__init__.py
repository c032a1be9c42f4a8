"""A coordinator's state on a replicated internal topic (Kafka's CoordinatorRuntime,
CoordinatorLoader and PartitionWriter): the group coordinator's ``__consumer_offsets``
(broker.groups.replicated_offsets) runs on it, and any coordinator keeping keyed state
the same way can (``__transaction_state``).

A coordinator key (group id, transactional id) belongs to partition
``(String.hashCode(key) & 0x7fffffff) % N`` of the coordinator's topic (N = its partition
count, fixed once the topic exists), and that partition's leader is the key's
coordinator. The coordinator supplies the topic's name and settings and names
(``StateTopic``), the state of one partition (a ``CoordinatorShard`` subclass: what an
op does at append and at acknowledgement, how a record decodes and encodes, the dump of
live records and its size) and load/unload callbacks; ``CoordinatorLog`` does the rest:

* The topic is created through etcd like any other (``broker.controller.create_topic``),
  on demand (``ensure_topic``, the first FindCoordinator that finds it missing): the
  configured partitions, the configured replicas capped at the live brokers (with a
  warning), ``min.insync.replicas`` 2 when there are 3 replicas or more, no time or size
  retention, never tiered. It is replicated by the normal replication.
* Records are (key bytes, value bytes or None for a tombstone) in uncompressed v2
  batches without producer id (``records``), appended by the partition's leader in its
  epoch. A write is acknowledged once the high watermark passed it (acks=all);
  ``min.insync.replicas`` is checked before the append. Replication failures become the
  coordinator errors Kafka gives: NOT_LEADER_OR_FOLLOWER and storage errors ->
  NOT_COORDINATOR; not enough replicas, timeouts and anything else ->
  COORDINATOR_NOT_AVAILABLE. A record whose write failed after the append stays in the
  log (as in Kafka) and counts on the next load.
* Loading: when this broker becomes leader of a partition (seen by a watch of the
  replica roles, on every metadata change and every 100 ms), it waits until the high
  watermark reaches the log end it found (the previous leaders' records are committed),
  then replays the partition from its log start into a new shard and hands it to the
  coordinator (``on_load``). Until then the partition's keys get
  COORDINATOR_LOAD_IN_PROGRESS (``coordinator_for``). Losing the lead (another leader or
  epoch, the replica dropped, the lease in doubt) unloads the partition (``on_unload``);
  its keys get NOT_COORDINATOR and clients find the new coordinator.
* Transactional writes (Kafka's scheduleTransactionalWriteOperation; the group
  coordinator's TxnOffsetCommit): one batch with the producer's id and epoch, base
  sequence -1, appended with origin COORDINATOR; the shard holds its ops for that
  producer (``apply_latest_at`` / ``apply_durable_at`` get each op's record offset and
  producer) until the producer's COMMIT or ABORT marker, which the replay reads in its
  place (``records.read_entries``, ``CoordinatorShard.apply_marker``) and which the
  coordinator applies once WriteTxnMarkers had it acknowledged (``settle_acknowledged``
  first, so every write before it is in the durable state). The dump is a list of
  writes (``dump_writes``: plain or in a producer's open transaction), and a shard may
  hold compaction back (``compactable``). A coordinator without transactions keeps the
  defaults.
* Two states per partition: the log-order one, writes in flight included, applied at
  append (what a replay rebuilds, what a dump restates), and the durable one readers
  see, applied in log order as acknowledgements arrive (a failed write applies nothing).
* Compaction (Kafka's log cleaner keeps the latest record per key; here the live keys
  are written again): when the partition holds more than ``max(segment bytes, 2 x live
  bytes)``, the leader rolls its active segment, appends every live key's latest record
  again (the dump, in its epoch, like a write), waits until the high watermark passes
  the dump (acks=all), then moves the log start offset to the dump's first offset and
  deletes the segments below it. A compaction that fails is tried again once another
  segment's worth was written. Followers follow: fetch responses carry the leader's log
  start offset and its segment bases (``broker.fetcher``), so they start a segment where
  the dump starts, move their log start offset there (never past their own high
  watermark), and the watch deletes the same segments at once. Crash and failover
  safety: the log start offset only ever moves to the first offset of a dump
  acknowledged in full, so every replica that can become leader holds, from its log
  start, either the old records followed by whatever part of the dump it has, or the
  whole dump. A replay (latest record of a key wins, in log order) gives the same state
  in both cases: a dump record restates a key's value as of the dump, which is what the
  replay has reached at that point, and a tombstone is never dropped alone: everything
  below the dump goes together, so no older value of a deleted key survives it.

Modules: ``records`` (the batches, the replay's reader, the key -> partition hash),
``shard`` (what a coordinator supplies: StateTopic, Naming, CoordinatorShard; the error
mapping), ``runtime`` (CoordinatorLog). Nothing is imported here, so that importing the
records' helpers does not pull in the replica manager. Everything here runs on the
broker's event loop.
"""
