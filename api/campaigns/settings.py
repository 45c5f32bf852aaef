"""Tuning of campaign sending, from the environment (documented in the README)."""

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class CampaignSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    # Parallel senders (each with its own SMTP connection) while one campaign is sending.
    concurrency: int = Field(default=8, ge=1, le=64, alias="SWITCHBOARD_CAMPAIGN_CONCURRENCY")
    # Recipients claimed (and charged) per transaction by one sender.
    batch_size: int = Field(default=10, ge=1, le=500, alias="SWITCHBOARD_CAMPAIGN_BATCH_SIZE")
    # One run of the send job stops claiming after this long and hands over to the next run,
    # so a lease on the due-work row always outlasts a run.
    slice_seconds: float = Field(default=20.0, gt=0, alias="SWITCHBOARD_CAMPAIGN_SLICE_SECONDS")
    # How long a crashed worker's claim on a campaign blocks another worker from taking over.
    lease_seconds: float = Field(default=45.0, gt=0, alias="SWITCHBOARD_CAMPAIGN_LEASE_SECONDS")
    # With the provider down (SMTP unreachable, refusing our sender), the campaign stays
    # `sending` and the next run is tried this long later.
    provider_retry_seconds: float = Field(default=60.0, gt=0,
                                          alias="SWITCHBOARD_CAMPAIGN_PROVIDER_RETRY_SECONDS")


@lru_cache
def campaign_settings() -> CampaignSettings:
    return CampaignSettings()
