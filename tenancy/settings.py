"""Settings read from the environment (see README for the list)."""

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_KEY_PEPPER = "switchboard-development-pepper"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    data_dir: Path = Field(default=Path(".data"), alias="SWITCHBOARD_DATA_DIR")

    smtp_host: str = Field(default="127.0.0.1", alias="SMTP_HOST")
    smtp_port: int = Field(default=1025, alias="SMTP_PORT")
    smtp_from: str = Field(default="Switchboard <no-reply@switchboard.local>", alias="SMTP_FROM")
    smtp_username: str | None = Field(default=None, alias="SMTP_USERNAME")
    smtp_password: str | None = Field(default=None, alias="SMTP_PASSWORD")
    smtp_starttls: bool = Field(default=False, alias="SMTP_STARTTLS")
    smtp_timeout_seconds: float = Field(default=10.0, alias="SMTP_TIMEOUT_SECONDS")

    telephony: str = Field(default="sandbox", alias="SWITCHBOARD_TELEPHONY")
    crm: str = Field(default="sandbox", alias="SWITCHBOARD_CRM")
    allow_private_webhooks: bool = Field(default=False, alias="SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS")
    webhook_retry_scale: float = Field(default=1.0, alias="SWITCHBOARD_WEBHOOK_RETRY_SCALE")
    # One webhook attempt (connect, send, answer) longer than this is a failed attempt.
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, le=60, alias="SWITCHBOARD_WEBHOOK_TIMEOUT_SECONDS"
    )
    # Webhook deliveries one worker process runs at once, and at most this many of them (across
    # workers) for one sub-account, so no tenant's slow receivers hold all of them (CONTRACT 11).
    webhook_concurrency: int = Field(
        default=50, ge=1, le=1000, alias="SWITCHBOARD_WEBHOOK_CONCURRENCY"
    )
    webhook_sub_account_concurrency: int = Field(
        default=10, ge=1, le=1000, alias="SWITCHBOARD_WEBHOOK_SUB_ACCOUNT_CONCURRENCY"
    )
    # Post-call analyses (one model request each) one worker process runs at once: the vendors'
    # rate limits, not ours, bound them.
    analysis_concurrency: int = Field(
        default=5, ge=1, le=200, alias="SWITCHBOARD_ANALYSIS_CONCURRENCY"
    )
    # Consecutive failed runs of one due-work item before it is set aside as `failed`.
    due_work_max_failures: int = Field(
        default=10, ge=1, le=100, alias="SWITCHBOARD_DUE_WORK_MAX_FAILURES"
    )

    # Campaign sending. Parallel senders (each with its own SMTP connection) per campaign run.
    campaign_concurrency: int = Field(
        default=8, ge=1, le=64, alias="SWITCHBOARD_CAMPAIGN_CONCURRENCY"
    )
    # Recipients claimed (and charged) per transaction by one sender.
    campaign_batch_size: int = Field(
        default=10, ge=1, le=500, alias="SWITCHBOARD_CAMPAIGN_BATCH_SIZE"
    )
    # One run of the send job stops claiming after this long and hands over to the next run,
    # so a lease on the due-work row always outlasts a run.
    campaign_slice_seconds: float = Field(
        default=20.0, gt=0, alias="SWITCHBOARD_CAMPAIGN_SLICE_SECONDS"
    )
    # How long a crashed worker's claim on a campaign blocks another worker from taking over.
    campaign_lease_seconds: float = Field(
        default=45.0, gt=0, alias="SWITCHBOARD_CAMPAIGN_LEASE_SECONDS"
    )
    # With the provider down (SMTP unreachable, refusing our sender), the campaign stays
    # `sending` and the next run is tried this long later.
    campaign_provider_retry_seconds: float = Field(
        default=60.0, gt=0, alias="SWITCHBOARD_CAMPAIGN_PROVIDER_RETRY_SECONDS"
    )
    # Multiplies a call campaign's retry delay (delay_minutes), as the webhook retry scale does
    # webhook delays: tests and demos retry in seconds; 1.0 in production.
    campaign_retry_scale: float = Field(
        default=1.0, gt=0, le=1.0, alias="SWITCHBOARD_CAMPAIGN_RETRY_SCALE"
    )

    rate_limit_requests: int = Field(default=100, alias="SWITCHBOARD_RATE_LIMIT_REQUESTS")
    rate_limit_window_seconds: int = Field(
        default=10, alias="SWITCHBOARD_RATE_LIMIT_WINDOW_SECONDS"
    )
    # When Redis cannot be reached: True lets requests through, False answers 503 (once the
    # grants this process already took from Redis are spent).
    rate_limit_fail_open: bool = Field(default=True, alias="SWITCHBOARD_RATE_LIMIT_FAIL_OPEN")

    # Keys are stored as HMAC-SHA256(key_pepper, key). serve and worker refuse the default.
    key_pepper: str = Field(default=DEFAULT_KEY_PEPPER, alias="SWITCHBOARD_KEY_PEPPER")
    # The pepper before a change: keys, links and signatures made under it keep working.
    key_pepper_previous: str | None = Field(default=None, alias="SWITCHBOARD_KEY_PEPPER_PREVIOUS")
    # Fernet keys, comma-separated: the first encrypts stored secrets, every one decrypts.
    secrets_key: str | None = Field(default=None, alias="SWITCHBOARD_SECRETS_KEY")
    public_url: str = Field(default="http://127.0.0.1:8000", alias="SWITCHBOARD_PUBLIC_URL")

    # PgBouncer in transaction mode before 1.21 cannot keep named prepared statements: set 0.
    db_statement_cache_size: int = Field(default=100, alias="SWITCHBOARD_DB_STATEMENT_CACHE_SIZE")
    # A direct PostgreSQL URL for sessions that must outlive a transaction (LISTEN, migrations)
    # when DATABASE_URL points at PgBouncer.
    direct_database_url: str | None = Field(default=None, alias="SWITCHBOARD_DIRECT_DATABASE_URL")
    # How long a resolved API key is trusted without a database lookup (0: never). A revoked
    # key, or one of a suspended or deleted sub-account, stops working within this time...
    auth_cache_seconds: float = Field(default=2.0, alias="SWITCHBOARD_AUTH_CACHE_SECONDS")
    # ...and this long while the API process is told of such changes (LISTEN, tenancy.principals),
    # which empty its cache at once.
    auth_cache_notified_seconds: float = Field(
        default=60.0, alias="SWITCHBOARD_AUTH_CACHE_NOTIFIED_SECONDS"
    )
    # A pooled connection is closed (and replaced) once it has worked in this many distinct
    # tenant schemas: its PostgreSQL backend keeps the catalog entries of every schema it
    # touched, about 120 KiB each (0: never; bench/RESULTS.md "Scale II", docs/operations.md).
    db_connection_max_tenants: int = Field(
        default=2000, ge=0, alias="SWITCHBOARD_DB_CONNECTION_MAX_TENANTS"
    )
    # A pooled connection idle this long is closed (asyncpg's max_inactive_connection_lifetime).
    db_connection_max_idle_seconds: float = Field(
        default=300.0, ge=0, alias="SWITCHBOARD_DB_CONNECTION_MAX_IDLE_SECONDS"
    )
    db_pool_min: int = Field(default=2, alias="SWITCHBOARD_DB_POOL_MIN")
    db_pool_max: int = Field(default=20, alias="SWITCHBOARD_DB_POOL_MAX")
    max_body_bytes: int = Field(default=1_048_576, alias="SWITCHBOARD_MAX_BODY_BYTES")
    log_format: str = Field(default="json", alias="SWITCHBOARD_LOG_FORMAT")
    # Check every response body against the model its route declares (the test suite does).
    validate_responses: bool = Field(default=False, alias="SWITCHBOARD_VALIDATE_RESPONSES")
    # On SIGTERM the worker stops taking jobs and gives running ones this long to finish.
    worker_shutdown_grace_seconds: float = Field(
        default=25.0, alias="SWITCHBOARD_WORKER_SHUTDOWN_GRACE_SECONDS"
    )
    invitation_ttl_days: int = 7

    # The voice runtime (`switchboard voice`, CONTRACT 6): where carriers, the sandbox carrier
    # included, reach its Media Streams WebSocket, and the http(s) base a real carrier is given.
    voice_url: str = Field(default="ws://127.0.0.1:8100", alias="SWITCHBOARD_VOICE_URL")
    voice_public_url: str | None = Field(default=None, alias="SWITCHBOARD_VOICE_PUBLIC_URL")
    # On SIGTERM the voice runtime takes no new call and gives running ones this long to end.
    voice_shutdown_grace_seconds: float = Field(
        default=600, ge=0, le=86_400, alias="SWITCHBOARD_VOICE_SHUTDOWN_GRACE_SECONDS"
    )
    # Calls one voice process runs at once: beyond it an authenticated media stream is closed
    # (1013) and the carrier tries again; about what one core carries (bench/RESULTS.md, voice).
    voice_max_calls: int = Field(default=20, ge=1, le=10_000, alias="SWITCHBOARD_VOICE_MAX_CALLS")
    # Voice processes `switchboard voice` runs on its port (SO_REUSEPORT): one per core.
    voice_processes: int = Field(default=1, ge=1, le=256, alias="SWITCHBOARD_VOICE_PROCESSES")
    # The voice process logs its event loop's thread's stack when the loop is held longer than
    # this (voice/loop_watchdog.py); 0 turns the watchdog off.
    voice_loop_stall_ms: int = Field(
        default=100, ge=0, le=60_000, alias="SWITCHBOARD_VOICE_LOOP_STALL_MS"
    )
    # Twilio's auth token checks the X-Twilio-Signature of its webhooks; its voice webhook is
    # TWILIO_VOICE_URL, by default voice_public_url + /voice/twilio/twiml (CONTRACT 9).
    twilio_auth_token: str | None = Field(default=None, alias="TWILIO_AUTH_TOKEN")
    twilio_voice_url: str | None = Field(default=None, alias="TWILIO_VOICE_URL")
    # Signs the sandbox carrier's webhooks; derived from the key pepper when unset.
    sandbox_webhook_secret: str | None = Field(
        default=None, alias="SWITCHBOARD_SANDBOX_WEBHOOK_SECRET"
    )
    # Each vendor's base URL, written as its own SDK takes it; tests and gateways point them
    # elsewhere (switchboard dev at the bundled fake vendors).
    openai_base_url: str = Field(
        default="https://api.openai.com/v1", alias="SWITCHBOARD_OPENAI_BASE_URL"
    )
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com", alias="SWITCHBOARD_ANTHROPIC_BASE_URL"
    )
    google_base_url: str = Field(
        default="https://generativelanguage.googleapis.com", alias="SWITCHBOARD_GOOGLE_BASE_URL"
    )
    deepseek_base_url: str = Field(
        default="https://api.deepseek.com/v1", alias="SWITCHBOARD_DEEPSEEK_BASE_URL"
    )
    grok_base_url: str = Field(default="https://api.x.ai/v1", alias="SWITCHBOARD_GROK_BASE_URL")
    deepgram_base_url: str = Field(
        default="https://api.deepgram.com", alias="SWITCHBOARD_DEEPGRAM_BASE_URL"
    )
    elevenlabs_base_url: str = Field(
        default="https://api.elevenlabs.io", alias="SWITCHBOARD_ELEVENLABS_BASE_URL"
    )
    cartesia_base_url: str = Field(
        default="https://api.cartesia.ai", alias="SWITCHBOARD_CARTESIA_BASE_URL"
    )

    # Where call recordings are kept (CONTRACT 6): `file` under <data_dir>/recordings, or `s3`
    # in a bucket (credentials from the standard AWS variables).
    recordings: Literal["file", "s3"] = Field(default="file", alias="SWITCHBOARD_RECORDINGS")
    recordings_s3_bucket: str | None = Field(default=None, alias="SWITCHBOARD_RECORDINGS_S3_BUCKET")
    recordings_s3_endpoint_url: str | None = Field(
        default=None, alias="SWITCHBOARD_RECORDINGS_S3_ENDPOINT_URL"
    )
    recordings_s3_region: str | None = Field(default=None, alias="SWITCHBOARD_RECORDINGS_S3_REGION")

    def vendor_base_url(self, vendor: str) -> str:
        url: str = getattr(self, f"{vendor}_base_url")
        return url.rstrip("/")


@lru_cache
def get_settings() -> Settings:
    return Settings()
