"""The event log: every event emitted (GET /events), each delivery of it and its replay."""
