"""Transport security and authentication: TLS contexts, SASL (PLAIN, SCRAM), local users."""
