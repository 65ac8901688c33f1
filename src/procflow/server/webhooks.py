"""Is a webhook request really from its sender? The two signature schemes ``procflow serve``
checks, as pure functions of the secret, the request's headers and raw body, and the time now.

- Slack (``POST /webhooks/slack``): ``X-Slack-Signature: v0=<hex HMAC-SHA256>`` of
  ``v0:{X-Slack-Request-Timestamp}:{body}``, keyed by the app's signing secret as text.
- Standard Webhooks (``POST /webhooks/events``): ``webhook-signature: v1,<base64 HMAC-SHA256>``
  of ``{webhook-id}.{webhook-timestamp}.{body}``; the header may hold several space-separated
  signatures (a sender rotating its secret signs with both), and one match is enough. The key is
  the base64 after ``whsec_``, or the secret's own UTF-8 bytes when it has no such prefix.

Either timestamp (Unix seconds) must be within :data:`TOLERANCE_SECONDS` of ``now``, which the
caller takes from the machine's real clock: a signature is about when the request was sent, not
about a store's virtual time. Signatures are compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from procflow.errors import ConfigError

__all__ = [
    "SLACK_SIGNATURE",
    "SLACK_TIMESTAMP",
    "TOLERANCE_SECONDS",
    "WEBHOOK_ID",
    "WEBHOOK_SIGNATURE",
    "WEBHOOK_TIMESTAMP",
    "Refusal",
    "slack_refusal",
    "slack_signature",
    "standard_refusal",
    "standard_signature",
    "webhook_key",
]

# Slack's documented window and the Standard Webhooks recommendation: a replayed request older
# (or newer) than this is refused even with a good signature.
TOLERANCE_SECONDS = 5 * 60

SLACK_SIGNATURE = "X-Slack-Signature"
SLACK_TIMESTAMP = "X-Slack-Request-Timestamp"
WEBHOOK_ID = "webhook-id"
WEBHOOK_TIMESTAMP = "webhook-timestamp"
WEBHOOK_SIGNATURE = "webhook-signature"
WEBHOOK_SECRET = "PROCFLOW_WEBHOOK_SECRET"
_WHSEC = "whsec_"


@dataclass(frozen=True)
class Refusal:
    """Why a request is not taken as signed: the header at fault and what is wrong with it."""

    field: str
    message: str


# --- Slack -----------------------------------------------------------------------------------


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` Slack sends for ``body`` at ``timestamp``."""
    signed = b"v0:" + _bytes(timestamp) + b":" + body
    return "v0=" + hmac.new(_bytes(secret), signed, hashlib.sha256).hexdigest()


def slack_refusal(
    secret: str, timestamp: str | None, signature: str | None, body: bytes, now: float
) -> Refusal | None:
    """Why this request is not one Slack signed with ``secret`` (None: it is)."""
    for name, value in ((SLACK_SIGNATURE, signature), (SLACK_TIMESTAMP, timestamp)):
        if not value:
            return Refusal(name, f"the {name} header is missing: not a signed Slack request")
    assert timestamp is not None and signature is not None
    seconds = _seconds(timestamp)
    if seconds is None:
        return Refusal(SLACK_TIMESTAMP, _not_seconds(SLACK_TIMESTAMP))
    if not _same(slack_signature(secret, timestamp, body), signature):
        return Refusal(
            SLACK_SIGNATURE,
            "the Slack signature does not match the request: its body was altered, or it was "
            "signed with another secret than SLACK_SIGNING_SECRET",
        )
    return _stale(SLACK_TIMESTAMP, seconds, now)


# --- Standard Webhooks -----------------------------------------------------------------------


def webhook_key(secret: str) -> bytes:
    """The HMAC key a ``PROCFLOW_WEBHOOK_SECRET`` stands for: the bytes base64-encoded after
    ``whsec_``, or else the text itself. A ``whsec_`` secret that is not base64 is refused (a
    :class:`~procflow.errors.ConfigError` naming the setting, never its value)."""
    if not secret.startswith(_WHSEC):
        return _bytes(secret)
    try:
        key = base64.b64decode(secret[len(_WHSEC) :], validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise ConfigError(
            f"{WEBHOOK_SECRET} starts with {_WHSEC} but what follows is not a base64 key",
            setting=WEBHOOK_SECRET,
        )
    return key


def standard_signature(key: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    """One ``webhook-signature`` entry (``v1,<base64>``) for ``body`` under ``key``."""
    signed = _bytes(msg_id) + b"." + _bytes(timestamp) + b"." + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def standard_refusal(
    key: bytes,
    msg_id: str | None,
    timestamp: str | None,
    signatures: str | None,
    body: bytes,
    now: float,
) -> Refusal | None:
    """Why this request is not one signed with ``key`` by the Standard Webhooks scheme (None:
    one of its ``v1`` signatures matches and its timestamp is recent)."""
    for name, value in (
        (WEBHOOK_ID, msg_id),
        (WEBHOOK_TIMESTAMP, timestamp),
        (WEBHOOK_SIGNATURE, signatures),
    ):
        if not value:
            return Refusal(name, f"the {name} header is missing: not a signed webhook")
    assert msg_id is not None and timestamp is not None and signatures is not None
    seconds = _seconds(timestamp)
    if seconds is None:
        return Refusal(WEBHOOK_TIMESTAMP, _not_seconds(WEBHOOK_TIMESTAMP))
    given = [s for s in signatures.split() if s.startswith("v1,")]
    if not given:
        return Refusal(WEBHOOK_SIGNATURE, f"the {WEBHOOK_SIGNATURE} header holds no v1 signature")
    expected = standard_signature(key, msg_id, timestamp, body)
    # Every entry is compared, a match or not, so the time taken says nothing about which.
    matched = [_same(expected, s) for s in given]
    if not any(matched):
        return Refusal(
            WEBHOOK_SIGNATURE,
            "no webhook signature matches the request: its body or headers were altered, or it "
            f"was signed with another secret than {WEBHOOK_SECRET}",
        )
    return _stale(WEBHOOK_TIMESTAMP, seconds, now)


# --- shared ----------------------------------------------------------------------------------


def _bytes(text: str) -> bytes:
    # Header values arrive as Latin-1 text; a lone surrogate must not make signing raise.
    return text.encode("utf-8", "surrogatepass")


def _same(expected: str, given: str) -> bool:
    return hmac.compare_digest(_bytes(expected), _bytes(given))


def _seconds(text: str) -> int | None:
    """A timestamp header's Unix seconds (None: not a plain whole number)."""
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 15:
        return None
    return int(text)


def _not_seconds(header: str) -> str:
    return f"the {header} header must be a whole number of seconds since 1970-01-01 (Unix time)"


def _stale(header: str, seconds: int, now: float) -> Refusal | None:
    off = abs(now - seconds)
    if off <= TOLERANCE_SECONDS:
        return None
    return Refusal(
        header,
        f"the {header} header is {int(off)} seconds from the server's clock (at most "
        f"{TOLERANCE_SECONDS} are allowed): a replayed or long-delayed request",
    )
