"""One module per Kafka API: the request/response dataclasses with their wire tables.

Adding an API is writing such a module (fields, version ranges, tags as in Kafka's JSON
message definitions) and one ``ApiSpec`` line in ``kwire.apis``.
"""
