"""The broker's security domain: ACLs and their decision, users, tokens, quotas, TLS contexts."""
