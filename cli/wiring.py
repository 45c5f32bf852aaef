"""What the processes are made of, written out: every blueprint the API serves, and every task,
cron job and due-work handler the worker runs. A route or a job is found here by name; adding a
feature means adding its lines here."""

from __future__ import annotations

from typing import Any

from arq import cron
from arq.worker import func
from quart import Quart

from api import health, metrics
from api.agency.routes import blueprint as agency_routes
from api.agents.routes import blueprint as agents_routes
from api.analysis import tasks as analysis_tasks
from api.analysis.service import ANALYSIS_WORK
from api.app import create_app
from api.appointments import tasks as appointment_reminders
from api.appointments.routes import blueprint as appointments_routes
from api.calendars.routes import blueprint as calendars_routes
from api.calls import tasks as call_tasks
from api.calls.routes import blueprint as calls_routes
from api.calls.routes import recordings_blueprint as recordings_routes
from api.calls.service import CALL_WORK
from api.campaigns import tasks as campaign_tasks
from api.campaigns.routes import blueprint as campaigns_routes
from api.companies.routes import blueprint as companies_routes
from api.consent.routes import blueprint as consent_routes
from api.contacts.routes import blueprint as contacts_routes
from api.conversations import tasks as message_tasks
from api.conversations.routes import blueprint as conversations_routes
from api.conversations.service import MESSAGE_SEND_WORK
from api.custom_fields.routes import blueprint as custom_fields_routes
from api.event_log import tasks as event_log_tasks
from api.event_log.routes import blueprint as event_log_routes
from api.events import DELIVERY_KIND
from api.integrations.routes import blueprint as integrations_routes
from api.invoices.routes import blueprint as invoices_routes
from api.notes.routes import blueprint as notes_routes
from api.number_pools.routes import blueprint as number_pools_routes
from api.phone_numbers import tasks as phone_number_tasks
from api.phone_numbers.routes import blueprint as phone_numbers_routes
from api.phone_numbers.service import RENEWAL_WORK
from api.smart_lists.routes import blueprint as smart_lists_routes
from api.tags.routes import blueprint as tags_routes
from api.team_users.routes import blueprint as team_users_routes
from api.tools.routes import blueprint as tools_routes
from api.tracking.routes import blueprint as tracking_routes
from api.wallet.routes import blueprint as wallet_routes
from api.webhook_subscriptions import tasks as webhook_tasks
from api.webhook_subscriptions.routes import blueprint as webhook_subscriptions_routes
from jobs import worker
from jobs.due import DueHandler
from tenancy import maintenance
from tenancy.settings import Settings, get_settings

# --- the API ------------------------------------------------------------------------------------

BLUEPRINTS = [
    metrics.blueprint,
    health.blueprint,
    agency_routes,
    agents_routes,
    appointments_routes,
    calendars_routes,
    calls_routes,
    campaigns_routes,
    companies_routes,
    consent_routes,
    contacts_routes,
    conversations_routes,
    custom_fields_routes,
    event_log_routes,
    integrations_routes,
    invoices_routes,
    notes_routes,
    number_pools_routes,
    phone_numbers_routes,
    recordings_routes,
    smart_lists_routes,
    tags_routes,
    team_users_routes,
    tools_routes,
    tracking_routes,
    wallet_routes,
    webhook_subscriptions_routes,
]


def build_app(settings: Settings | None = None) -> Quart:
    """The API as `switchboard serve` runs it."""
    return create_app(settings, blueprints=BLUEPRINTS)


# --- the worker -----------------------------------------------------------------------------------

# Each kind of work has a queue and capacity of its own (CONTRACT 11: a backlog of one kind, or of
# one sub-account, never holds up another). The default queue keeps the provider work a request
# waits for, beside housekeeping only (the sweeper and purges, each one run at a time); due work
# that names no queue (renewals) shares the background queue (jobs.due.BACKGROUND_QUEUE).
CALLS_QUEUE = "arq:queue:calls"
DELIVERIES_QUEUE = "arq:queue:deliveries"
CAMPAIGNS_QUEUE = "arq:queue:campaigns"
ANALYSIS_QUEUE = "arq:queue:analysis"
REMINDERS_QUEUE = "arq:queue:reminders"
CALL_POLL_SECONDS = 0.05
MESSAGES_QUEUE = "arq:queue:messages"


def _jobs(settings: Settings) -> worker.Jobs:
    return worker.Jobs(
        tasks=[
            # Provider work a request waits for (it answers with the result).
            phone_number_tasks.purchase_phone_number,
            phone_number_tasks.import_phone_number,
            phone_number_tasks.assign_phone_number,
            phone_number_tasks.unassign_phone_number,
            phone_number_tasks.release_phone_number,
            maintenance.purge_idempotency_keys,
            maintenance.purge_deleted_tenants,
            event_log_tasks.purge_old_events,
        ],
        cron_jobs=[
            cron(maintenance.purge_idempotency_keys, minute={0, 15, 30, 45}, run_at_startup=False),
            cron(maintenance.purge_deleted_tenants, minute={7, 37}, run_at_startup=False),
            # Events and finished deliveries past 30 days, every tenant, in small batches.
            cron(event_log_tasks.purge_old_events, minute={23}, run_at_startup=False, timeout=3600),
        ],
        max_jobs=20,
        due_handlers=[
            DueHandler(
                campaign_tasks.SEND_KIND,
                campaign_tasks.send_campaign,
                lease_seconds=settings.campaign_lease_seconds,
                queue=CAMPAIGNS_QUEUE,
            ),
            DueHandler(
                campaign_tasks.CAMPAIGN_CALLS_WORK,
                campaign_tasks.dial_call_campaign,
                lease_seconds=60,
                queue=CAMPAIGNS_QUEUE,
            ),
            DueHandler(CALL_WORK, call_tasks.advance_call, lease_seconds=60, queue=CALLS_QUEUE),
            DueHandler(RENEWAL_WORK, phone_number_tasks.renew_phone_number, lease_seconds=60),
            DueHandler(
                DELIVERY_KIND,
                webhook_tasks.deliver_webhook,
                lease_seconds=webhook_tasks.LEASE_SECONDS,
                queue=DELIVERIES_QUEUE,
            ),
            DueHandler(
                ANALYSIS_WORK, analysis_tasks.analyse_call, lease_seconds=120, queue=ANALYSIS_QUEUE
            ),
            DueHandler(
                appointment_reminders.APPOINTMENT_REMINDER,
                appointment_reminders.send_due_reminders,
                lease_seconds=120,
                queue=REMINDERS_QUEUE,
            ),
            DueHandler(
                MESSAGE_SEND_WORK,
                message_tasks.send_scheduled_message,
                lease_seconds=120,
                queue=MESSAGES_QUEUE,
            ),
        ],
        queues=[
            # A call's every step (placed, followed, ended) and a call campaign's wake-up on
            # a call's end go through these two: looked at every 50 ms, not arq's 0.5 s.
            worker.Queue(CALLS_QUEUE, 20, poll_delay=CALL_POLL_SECONDS),
            # At most 5 runs per subscription and SWITCHBOARD_WEBHOOK_SUB_ACCOUNT_CONCURRENCY
            # per sub-account hold these slots (api/webhook_subscriptions/tasks.py).
            worker.Queue(DELIVERIES_QUEUE, settings.webhook_concurrency),
            worker.Queue(CAMPAIGNS_QUEUE, 10, poll_delay=CALL_POLL_SECONDS),
            worker.Queue(ANALYSIS_QUEUE, settings.analysis_concurrency),
            worker.Queue(REMINDERS_QUEUE, 5),
            worker.Queue(MESSAGES_QUEUE, 5),
        ],
    )


JOBS = _jobs(get_settings())


def worker_settings(database_url: str, redis_url: str, **overrides: Any) -> dict[str, Any]:
    """arq Worker keyword arguments for `switchboard worker`, with every job above (the settings
    of this moment: SWITCHBOARD_WEBHOOK_CONCURRENCY, campaign lease)."""
    return worker.worker_settings(database_url, redis_url, _jobs(get_settings()), **overrides)


__all__ = ["BLUEPRINTS", "JOBS", "build_app", "func", "worker_settings"]
