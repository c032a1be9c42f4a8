"""The Confluent Schema Registry REST API (api.schema_registry.routes) on the broker's own
registry listener and, for requests other brokers forward, under /schema-registry on its
HTTP listener."""
