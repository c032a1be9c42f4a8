"""Share groups (KIP-932): queue semantics over Kafka topics.

A share group's members consume the same partitions together; every record is handed to
one member at a time under an acquisition lock and acknowledged one by one (ACCEPT,
RELEASE, REJECT). Modules:

================  ===========================================================
``errors``        the share-group errors, with their Kafka codes
``config``        the group configs (``share.*``) and the broker defaults
``partition``     a share partition's in-flight window (pure, injectable clock)
``membership``    a share group's members, epochs and assignment (pure)
``sessions``      share sessions (ShareFetch/ShareAcknowledge epochs, KIP-932)
``service``       the broker's share groups: ties the above to the read path
================  ===========================================================
"""
