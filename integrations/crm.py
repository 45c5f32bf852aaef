"""External CRM locations: an interface, and the `sandbox` provider that needs no network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Location:
    id: str
    name: str
    timezone: str


class CRMError(Exception):
    pass


class CRMProvider(Protocol):
    async def fetch_location(self, location_id: str) -> Location: ...

    async def connect_location(self, location_id: str, sub_account_id: str) -> None: ...


class SandboxCRM:
    """Knows every location except those whose id begins with `invalid`."""

    async def fetch_location(self, location_id: str) -> Location:
        if location_id.startswith("invalid"):
            raise CRMError(f"location {location_id} could not be fetched")
        return Location(id=location_id, name=f"Sandbox Location {location_id}", timezone="UTC")

    async def connect_location(self, location_id: str, sub_account_id: str) -> None:
        if location_id.startswith("invalid"):
            raise CRMError(f"location {location_id} could not be connected")


def crm_provider(name: str) -> CRMProvider:
    if name == "sandbox":
        return SandboxCRM()
    raise ValueError(f"unknown CRM provider {name!r}")
