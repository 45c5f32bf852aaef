"""Where job runs are counted: a Redis hash of `<task>:ok|failed`, written by the worker
(jobs/metrics.py) and read by the API's /metrics."""

JOB_COUNTS_KEY = "switchboard:metrics:jobs"
