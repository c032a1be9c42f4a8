"""The transaction coordinator (KIP-98, KIP-360, KIP-447, KIP-890), Kafka's design.

Pure logic, no I/O, no clock: ``state`` holds a transactional id's metadata, Kafka's state
machine and the prepare / complete / abandon protocol of a transition; ``transitions`` the
requests (InitProducerId, AddPartitionsToTxn and its KIP-890 verification,
AddOffsetsToTxn, EndTxn), the markers' completion, the transaction timeout and the
transactional id's expiry; ``cache`` the metadata of the ``__transaction_state``
partitions this broker leads (loading, NOT_COORDINATOR, DescribeTransactions,
ListTransactions); ``log_codec`` the records of that topic, ``replay`` rebuilding a
partition from them, ``partitioner`` which partition owns an id; ``config`` the broker
settings; ``errors`` the Kafka errors that ``hot.errors`` does not name yet.

``markers`` is the one part that runs on the event loop: the writer of a transaction's
markers to its partitions' leaders, retried until written, with the leader lookup and the
sending injected (``broker.txn_markers`` wires them to the broker).
"""
