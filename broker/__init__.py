"""Strata clusters: metadata on etcd and Kafka-style replication.

Metadata: ``etcd`` is the only module that talks to the etcd client library; ``keys``
owns the key layout; ``metadata`` holds the typed records and the broker's client;
``controller`` holds placement, leader election (pure functions) and the elected
controller. Replication: ``replication`` holds the leader's and follower's rules as pure
logic; ``replica_manager`` applies them to this broker's replicas, ``fetcher`` pulls from
leaders; ``broker`` serves clients (its Kafka handlers: api.handlers); ``log_manager`` and
``hw_checkpoint`` store replicated logs; ``node`` is a broker's life cycle in a cluster,
``config`` its settings and ``status`` the ``strata cluster status`` report
(docs/cluster.md).
"""
