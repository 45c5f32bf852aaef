"""The composition root: the `switchboard` commands, and the written lists (cli/wiring.py) of
every blueprint the API serves and every task the worker runs."""
