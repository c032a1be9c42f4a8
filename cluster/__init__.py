"""Cluster metadata on etcd: broker registry, topics, partition state, controller election.

``etcd`` is the only module that talks to the etcd client library; ``keys`` owns the key
layout; ``metadata`` holds the typed records and the broker's client; ``controller``
holds placement, leader election (pure functions) and the elected controller.
"""
