"""`switchboard dev`'s mail catcher: with SMTP_HOST unset, every email the platform sends
(invitations, contact messages, campaigns) is delivered over real SMTP to a local server that
keeps it in a Maildir under `<data dir>/mail`, instead of failing for want of a mail server.

Any mail client reads that folder (`mutt -f .data/mail`); set SMTP_HOST (and SMTP_PORT) to send
through a real server instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox

from tenancy.embedded import free_port


def wants_real_server() -> bool:
    return bool(os.environ.get("SMTP_HOST", "").strip())


def start_mail_catcher(data_dir: Path) -> tuple[Controller, Path]:
    """The catcher on a free loopback port, and this process's SMTP settings pointed at it."""
    maildir = data_dir / "mail"
    maildir.parent.mkdir(parents=True, exist_ok=True)
    controller = Controller(
        Mailbox(maildir), hostname="127.0.0.1", port=free_port(), enable_SMTPUTF8=True
    )
    controller.start()
    os.environ.update(
        {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(controller.port), "SMTP_STARTTLS": "false"}
    )
    os.environ.pop("SMTP_USERNAME", None)
    os.environ.pop("SMTP_PASSWORD", None)
    return controller, maildir
