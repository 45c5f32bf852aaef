"""Background work on arq: tasks and the worker settings."""
