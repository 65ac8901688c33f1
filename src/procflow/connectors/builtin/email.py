"""The built-in ``email`` connector: ``email.send`` sends one plain-text message through SMTP.

It is also the sender of an intent's ``notify``: procflow's mail has one send path. Without an
``smtp_url`` (``PROCFLOW_SMTP_URL``) it works in outbox mode: the message is kept in
``ctx.outbox`` (committed with the step, listed by ``procflow outbox list``) and the action
returns a message id minted by procflow from the step's idempotency key, the same for every
attempt of one step execution.

Configured (``smtp://[user:password@]host:port``, or ``smtps://`` for TLS from the first byte),
it sends with :mod:`smtplib`. On ``smtp://`` with credentials, the connection is upgraded with
STARTTLS when the server offers it, before logging in. The Message-ID is derived from the
idempotency key too, so a message re-sent after a crash carries the id of the first one. An SMTP
answer in the 5xx range (a refused recipient, bad credentials) raises
:class:`SmtpFatalError`, a :class:`~procflow.errors.NonRetryableError`; a 4xx answer or a
network failure raises :class:`SmtpError` (``retry`` applies). The password never appears in an
error message.
"""

from __future__ import annotations

import hashlib
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import formatdate, getaddresses, parseaddr
from typing import Any
from urllib.parse import unquote, urlsplit

from procflow.errors import NonRetryableError, SmtpError, SmtpFatalError
from procflow.runtime.interpret.context import KeptMessage, StepContext

DEFAULT_FROM = "procflow@localhost"
# The SMTP timeout when the step sets none (an unbounded conversation would hold the worker).
DEFAULT_TIMEOUT = 30.0
DEFAULT_PORTS = {"smtp": 25, "smtps": 465}
URL_FORM = "smtp://[user:password@]host:port (or smtps://)"


@dataclass(frozen=True)
class SmtpTarget:
    """A parsed ``smtp_url``. Its ``repr`` hides the password."""

    tls: bool  # smtps: TLS from the start
    host: str
    port: int
    user: str | None = None
    password: str | None = None

    def __repr__(self) -> str:
        scheme = "smtps" if self.tls else "smtp"
        who = f"{self.user}:***@" if self.user is not None else ""
        return f"SmtpTarget({scheme}://{who}{self.host}:{self.port})"

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def parse_smtp_url(url: str) -> SmtpTarget:
    """``smtp://[user:password@]host[:port]`` (default port 25; ``smtps://``: 465). User and
    password may be percent-encoded. Raises :class:`NonRetryableError` without echoing the URL
    (it may hold the password)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise NonRetryableError(
            f"email.send: PROCFLOW_SMTP_URL must look like {URL_FORM}; "
            f"its scheme is [{scheme or 'missing'}]"
        )
    try:
        port = parts.port
    except ValueError:
        raise NonRetryableError(
            f"email.send: PROCFLOW_SMTP_URL has a port that is not a number in 1-65535 ({URL_FORM})"
        ) from None
    host = parts.hostname
    if not host:
        raise NonRetryableError(f"email.send: PROCFLOW_SMTP_URL names no host ({URL_FORM})")
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return SmtpTarget(scheme == "smtps", host, port or DEFAULT_PORTS[scheme], user, password)


def message_id(idempotency_key: str, domain: str = "procflow", prefix: str = "procflow") -> str:
    """A Message-ID derived from the step's idempotency key (stable across its attempts)."""
    digest = hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()[:16]
    return f"<{prefix}-{digest}@{domain}>"


def outbox_id(idempotency_key: str) -> str:
    """The id minted for a message kept in the outbox."""
    return message_id(idempotency_key, prefix="outbox")


def send(ctx: StepContext, to: str, subject: str, body: str) -> dict[str, Any]:
    """Sends ``body`` to ``to`` (one address, or several separated by commas); returns
    ``{id}``, the Message-ID."""
    smtp_url = ctx.config.get("smtp_url")
    if not smtp_url:
        ctx.outbox.append(KeptMessage("email", to, subject, body))
        return {"id": outbox_id(ctx.idempotency_key)}

    target = parse_smtp_url(str(smtp_url))
    sender = str(ctx.config.get("from") or DEFAULT_FROM)
    sender_addr = parseaddr(sender)[1]
    if "@" not in sender_addr:
        raise NonRetryableError(
            f"email.send: the From address (PROCFLOW_SMTP_FROM) [{sender}] is not an e-mail address"
        )
    recipients = _recipients(to)
    mid = message_id(ctx.idempotency_key, domain=sender_addr.rsplit("@", 1)[1] or "procflow")
    msg = _message(sender, to, subject, body, mid)
    seconds = DEFAULT_TIMEOUT if ctx.timeout is None else ctx.timeout
    refused = _deliver(target, (sender_addr, recipients), msg, to, seconds)
    accepted = [r for r in recipients if r not in refused]
    for addr, (code, text) in refused.items():
        ctx.log.warning(
            "email.send: %s refused recipient [%s]: %s %s", target.where, addr, code, _text(text)
        )
    ctx.sent.extend(accepted)
    return {"id": mid}


def _recipients(to: str) -> list[str]:
    if "\r" in to or "\n" in to:
        raise NonRetryableError("email.send: arg [to] must be one line")
    addrs = [addr for _, addr in getaddresses([to]) if addr]
    bad = [addr for addr in addrs if "@" not in addr]
    if not addrs or bad:
        raise NonRetryableError(
            f"email.send: arg [to] [{to}] is not an e-mail address (or a comma-separated list)"
        )
    return addrs


def _message(sender: str, to: str, subject: str, body: str, mid: str) -> EmailMessage:
    msg = EmailMessage(policy=SMTP_POLICY)
    try:
        msg["From"] = sender
        msg["To"] = to
        msg["Subject"] = subject
    except ValueError as exc:  # a header value with a line break
        raise NonRetryableError(f"email.send: {exc}; subject and addresses are one line") from exc
    msg["Date"] = formatdate(usegmt=True)
    msg["Message-ID"] = mid
    msg.set_content(body)
    return msg


def _deliver(
    target: SmtpTarget,
    envelope: tuple[str, list[str]],
    msg: EmailMessage,
    to: str,
    seconds: float,
) -> dict[str, tuple[int, bytes]]:
    """One SMTP conversation (``envelope``: sender, recipients) within ``seconds`` per
    operation; returns the refused recipients (when some were accepted)."""
    sender, recipients = envelope
    where = f"email.send to [{to}] via {target.where}"
    secrets = [target.password] if target.password else []
    try:
        client: smtplib.SMTP = (
            smtplib.SMTP_SSL(
                target.host, target.port, timeout=seconds, context=ssl.create_default_context()
            )
            if target.tls
            else smtplib.SMTP(target.host, target.port, timeout=seconds)
        )
    except smtplib.SMTPResponseException as exc:
        raise _answered(where, exc, secrets) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise SmtpError(f"{where}: cannot connect: {_scrub(_describe(exc), secrets)}") from None
    try:
        client.ehlo_or_helo_if_needed()
        if target.user is not None:
            if not target.tls and client.has_extn("starttls"):
                client.starttls(context=ssl.create_default_context())
                client.ehlo()
            client.login(target.user, target.password or "")
        refused: dict[str, tuple[int, bytes]] = client.send_message(msg, sender, recipients)
    except smtplib.SMTPRecipientsRefused as exc:  # every recipient refused
        codes = [code for code, _ in exc.recipients.values()]
        detail = "; ".join(
            f"{addr}: {code} {_text(text)}" for addr, (code, text) in exc.recipients.items()
        )
        message = f"{where}: every recipient was refused ({_scrub(detail, secrets)})"
        if codes and all(code >= 500 for code in codes):
            raise SmtpFatalError(message + " (not retried)", min(codes)) from None
        raise SmtpError(message, min(codes) if codes else None) from None
    except smtplib.SMTPNotSupportedError:
        raise SmtpFatalError(
            f"{where}: the server does not support AUTH, but PROCFLOW_SMTP_URL has credentials"
        ) from None
    except smtplib.SMTPResponseException as exc:
        raise _answered(where, exc, secrets) from None
    except (smtplib.SMTPException, OSError) as exc:  # network, TLS, a dropped connection
        raise SmtpError(f"{where}: {_scrub(_describe(exc), secrets)}") from None
    finally:
        _close(client)
    return refused


def _answered(where: str, exc: smtplib.SMTPResponseException, secrets: list[str]) -> SmtpError:
    text = _scrub(_text(exc.smtp_error), secrets)
    message = f"{where}: the server answered {exc.smtp_code} {text}"
    if exc.smtp_code >= 500:
        return SmtpFatalError(message + " (not retried)", exc.smtp_code)
    return SmtpError(message, exc.smtp_code)


def _close(client: smtplib.SMTP) -> None:
    """QUIT, ignoring failures: the message was either sent or the error is already raised."""
    try:
        client.quit()
    except (smtplib.SMTPException, OSError):
        client.close()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(raw: bytes | str) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return " ".join(text.split())


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
