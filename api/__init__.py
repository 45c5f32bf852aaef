"""HTTP interface: app factory, error envelope, auth, and one folder per feature."""
