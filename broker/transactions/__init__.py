"""The transaction coordinator (KIP-98, KIP-360, KIP-447, KIP-890), Kafka's design.

Pure logic, no I/O: ``state`` holds a transactional id's metadata, Kafka's state machine and
the prepare / complete / abandon protocol of a transition; ``transitions`` the requests
(InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), the markers' completion,
the transaction timeout and the transactional id's expiry; ``log_codec`` the records of the
internal ``__transaction_state`` topic, ``replay`` rebuilding a partition's metadata from
them, ``partitioner`` which partition owns an id; ``errors`` the Kafka errors that
``hot.errors`` does not name yet.
"""
