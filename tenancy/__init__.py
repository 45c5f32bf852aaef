"""Control plane: settings, database, keys, principals, tenants, provisioning, CLI."""
