"""The two webhook signature schemes (procflow.server.webhooks), checked against the vectors their
publishers give and against HMACs this file computes itself (``hmac``/``hashlib`` directly, not
through the module), for every way a request can fail: altered body, wrong secret, a timestamp
outside five minutes either way, a missing or unreadable header.

Published vectors:
- Slack's worked example in its "Verifying requests from Slack" guide (signing secret, timestamp
  1531420618, a slash-command body, and the signature it yields);
- the Standard Webhooks reference library's signing test (``whsec_`` secret, message id,
  timestamp 1614265330, payload, and its ``v1,`` signature). The specification's own text gives
  an example signature but not the secret behind it, so that library test is the vector used.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from procflow.errors import ConfigError
from procflow.server.webhooks import (
    TOLERANCE_SECONDS,
    Refusal,
    slack_refusal,
    slack_signature,
    standard_refusal,
    standard_signature,
    webhook_key,
)

# --- Slack's published example ---------------------------------------------------------------

SLACK_DOC_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_DOC_TS = "1531420618"
SLACK_DOC_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    b"collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F3977008"
    b"85554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c4"
    b"47fce8b6703c"
)
SLACK_DOC_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
SLACK_DOC_NOW = float(SLACK_DOC_TS) + 60

# --- the Standard Webhooks reference library's vector ----------------------------------------

SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SW_TS = "1614265330"
SW_BODY = b'{"test": 2432232314}'
SW_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
SW_NOW = float(SW_TS)


def slack_mac(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's signature, computed here without procflow."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def sw_mac(key: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    """A Standard Webhooks v1 signature, computed here without procflow."""
    base = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, base, hashlib.sha256).digest()).decode()


# --- Slack -----------------------------------------------------------------------------------


def test_slack_published_example_signs_and_verifies() -> None:
    assert slack_signature(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_BODY) == SLACK_DOC_SIGNATURE
    assert slack_mac(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_BODY) == SLACK_DOC_SIGNATURE
    refused = slack_refusal(
        SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY, SLACK_DOC_NOW
    )
    assert refused is None


def test_slack_signature_of_other_values_matches_an_independent_hmac() -> None:
    body = b"payload=%7B%22type%22%3A%22block_actions%22%7D"
    assert slack_signature("s3cret", "1700000000", body) == slack_mac("s3cret", "1700000000", body)
    assert slack_refusal("s3cret", "1700000000", slack_mac("s3cret", "1700000000", body), body,
                         1700000000.0) is None  # fmt: skip


MISMATCH = (
    "the Slack signature does not match the request: its body was altered, or it was signed "
    "with another secret than SLACK_SIGNING_SECRET"
)


@pytest.mark.parametrize(
    ("secret", "timestamp", "signature", "body"),
    [
        pytest.param(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE,
                     SLACK_DOC_BODY.replace(b"foobar", b"foobaz"), id="tampered body"),
        pytest.param(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY + b"&x=1",
                     id="body with more"),
        pytest.param("another-secret", SLACK_DOC_TS, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY,
                     id="wrong secret"),
        pytest.param(SLACK_DOC_SECRET, "1531420619", SLACK_DOC_SIGNATURE, SLACK_DOC_BODY,
                     id="timestamp changed"),
        pytest.param(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE.upper(), SLACK_DOC_BODY,
                     id="not the hex Slack sends"),
        pytest.param(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE[3:], SLACK_DOC_BODY,
                     id="without v0="),
        pytest.param(SLACK_DOC_SECRET, SLACK_DOC_TS, "v0=\xe9\u00ff", SLACK_DOC_BODY,
                     id="not ASCII"),
    ],
)  # fmt: skip
def test_slack_refuses_a_signature_that_does_not_match(
    secret: str, timestamp: str, signature: str, body: bytes
) -> None:
    got = slack_refusal(secret, timestamp, signature, body, float(timestamp))
    assert got == Refusal("X-Slack-Signature", MISMATCH)


@pytest.mark.parametrize("offset", [-TOLERANCE_SECONDS, TOLERANCE_SECONDS, 0])
def test_slack_takes_a_timestamp_within_five_minutes_either_way(offset: int) -> None:
    now = float(SLACK_DOC_TS) + offset
    got = slack_refusal(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY, now)
    assert got is None


@pytest.mark.parametrize(("offset", "off"), [(301, 301), (-301, 301), (86_400 * 365, 31_536_000)])
def test_slack_refuses_a_stale_or_future_timestamp_even_well_signed(offset: int, off: int) -> None:
    now = float(SLACK_DOC_TS) + offset
    got = slack_refusal(SLACK_DOC_SECRET, SLACK_DOC_TS, SLACK_DOC_SIGNATURE, SLACK_DOC_BODY, now)
    assert got == Refusal(
        "X-Slack-Request-Timestamp",
        f"the X-Slack-Request-Timestamp header is {off} seconds from the server's clock (at most "
        "300 are allowed): a replayed or long-delayed request",
    )


@pytest.mark.parametrize(
    ("timestamp", "signature", "field"),
    [
        (None, SLACK_DOC_SIGNATURE, "X-Slack-Request-Timestamp"),
        ("", SLACK_DOC_SIGNATURE, "X-Slack-Request-Timestamp"),
        (SLACK_DOC_TS, None, "X-Slack-Signature"),
        (SLACK_DOC_TS, "", "X-Slack-Signature"),
        (None, None, "X-Slack-Signature"),
    ],
)
def test_slack_refuses_a_request_without_its_headers(
    timestamp: str | None, signature: str | None, field: str
) -> None:
    got = slack_refusal(SLACK_DOC_SECRET, timestamp, signature, SLACK_DOC_BODY, SLACK_DOC_NOW)
    assert got == Refusal(field, f"the {field} header is missing: not a signed Slack request")


@pytest.mark.parametrize(
    "timestamp", ["soon", "-1531420618", "1531420618.5", "١٥٣١٤٢٠٦١٨", "9" * 5000]
)
def test_slack_refuses_a_timestamp_that_is_not_unix_seconds(timestamp: str) -> None:
    signature = slack_mac(SLACK_DOC_SECRET, timestamp, SLACK_DOC_BODY)
    got = slack_refusal(SLACK_DOC_SECRET, timestamp, signature, SLACK_DOC_BODY, SLACK_DOC_NOW)
    assert got == Refusal(
        "X-Slack-Request-Timestamp",
        "the X-Slack-Request-Timestamp header must be a whole number of seconds since 1970-01-01 "
        "(Unix time)",
    )


# --- Standard Webhooks -----------------------------------------------------------------------


def test_standard_webhooks_reference_vector_signs_and_verifies() -> None:
    key = webhook_key(SW_SECRET)
    assert key == base64.b64decode(SW_SECRET.removeprefix("whsec_"))
    assert standard_signature(key, SW_MSG_ID, SW_TS, SW_BODY) == SW_SIGNATURE
    assert sw_mac(key, SW_MSG_ID, SW_TS, SW_BODY) == SW_SIGNATURE
    assert standard_refusal(key, SW_MSG_ID, SW_TS, SW_SIGNATURE, SW_BODY, SW_NOW) is None


def test_a_secret_without_whsec_is_the_key_as_text() -> None:
    key = webhook_key("plain shared secret")
    assert key == b"plain shared secret"
    signature = sw_mac(b"plain shared secret", "evt-1", "1700000000", b"{}")
    assert standard_refusal(key, "evt-1", "1700000000", signature, b"{}", 1700000000.0) is None
    # Not read as base64: the same text decoded would be another key.
    assert webhook_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == b"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize("secret", ["whsec_", "whsec_not base64!", "whsec_abc", "whsec_====="])
def test_a_whsec_secret_that_is_not_base64_is_refused_without_showing_it(secret: str) -> None:
    with pytest.raises(ConfigError) as refused:
        webhook_key(secret)
    message = str(refused.value)
    assert (
        message == "PROCFLOW_WEBHOOK_SECRET starts with whsec_ but what follows is not a base64 key"
    )
    assert refused.value.setting == "PROCFLOW_WEBHOOK_SECRET"


def test_one_matching_signature_among_several_is_enough() -> None:
    key = webhook_key(SW_SECRET)
    others = [
        "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",  # a retired secret's
        "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7T",
        "v2," + SW_SIGNATURE.removeprefix("v1,"),  # the right bytes under another scheme: ignored
    ]
    header = " ".join([*others[:2], SW_SIGNATURE, others[2]])
    assert standard_refusal(key, SW_MSG_ID, SW_TS, header, SW_BODY, SW_NOW) is None
    refused = standard_refusal(key, SW_MSG_ID, SW_TS, " ".join(others), SW_BODY, SW_NOW)
    assert refused is not None and refused.field == "webhook-signature"


SW_MISMATCH = (
    "no webhook signature matches the request: its body or headers were altered, or it was "
    "signed with another secret than PROCFLOW_WEBHOOK_SECRET"
)


@pytest.mark.parametrize(
    ("secret", "msg_id", "timestamp", "signature", "body"),
    [
        pytest.param(SW_SECRET, SW_MSG_ID, SW_TS, SW_SIGNATURE, b'{"test": 2432232315}',
                     id="tampered body"),
        pytest.param("whsec_" + base64.b64encode(b"another key").decode(), SW_MSG_ID, SW_TS,
                     SW_SIGNATURE, SW_BODY, id="wrong secret"),
        pytest.param(SW_SECRET.removeprefix("whsec_"), SW_MSG_ID, SW_TS, SW_SIGNATURE, SW_BODY,
                     id="the secret's text, not its key"),
        pytest.param(SW_SECRET, "msg_other", SW_TS, SW_SIGNATURE, SW_BODY, id="another id"),
        pytest.param(SW_SECRET, SW_MSG_ID, "1614265331", SW_SIGNATURE, SW_BODY,
                     id="another timestamp"),
        pytest.param(SW_SECRET, SW_MSG_ID, SW_TS,
                     "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=", SW_BODY,
                     id="one character off"),
        pytest.param(SW_SECRET, SW_MSG_ID, SW_TS, "v1,\u00e9t\u00e9", SW_BODY, id="not ASCII"),
    ],
)  # fmt: skip
def test_standard_webhooks_refuses_a_signature_that_does_not_match(
    secret: str, msg_id: str, timestamp: str, signature: str, body: bytes
) -> None:
    got = standard_refusal(webhook_key(secret), msg_id, timestamp, signature, body,
                           float(timestamp))  # fmt: skip
    assert got == Refusal("webhook-signature", SW_MISMATCH)


def test_a_signature_header_without_any_v1_entry_is_refused() -> None:
    header = "v1a,abc v2,def"
    got = standard_refusal(webhook_key(SW_SECRET), SW_MSG_ID, SW_TS, header, SW_BODY, SW_NOW)
    assert got == Refusal("webhook-signature", "the webhook-signature header holds no v1 signature")


@pytest.mark.parametrize("offset", [-TOLERANCE_SECONDS, TOLERANCE_SECONDS])
def test_standard_webhooks_takes_five_minutes_either_way(offset: int) -> None:
    key = webhook_key(SW_SECRET)
    assert standard_refusal(key, SW_MSG_ID, SW_TS, SW_SIGNATURE, SW_BODY, SW_NOW + offset) is None


@pytest.mark.parametrize("offset", [-301, 301])
def test_standard_webhooks_refuses_a_stale_or_future_timestamp(offset: int) -> None:
    key = webhook_key(SW_SECRET)
    got = standard_refusal(key, SW_MSG_ID, SW_TS, SW_SIGNATURE, SW_BODY, SW_NOW + offset)
    assert got == Refusal(
        "webhook-timestamp",
        "the webhook-timestamp header is 301 seconds from the server's clock (at most 300 are "
        "allowed): a replayed or long-delayed request",
    )


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_standard_webhooks_refuses_a_request_without_each_header(missing: str) -> None:
    headers: dict[str, str | None] = {
        "webhook-id": SW_MSG_ID,
        "webhook-timestamp": SW_TS,
        "webhook-signature": SW_SIGNATURE,
    }
    headers[missing] = None
    got = standard_refusal(
        webhook_key(SW_SECRET), headers["webhook-id"], headers["webhook-timestamp"],
        headers["webhook-signature"], SW_BODY, SW_NOW,
    )  # fmt: skip
    assert got == Refusal(missing, f"the {missing} header is missing: not a signed webhook")


def test_standard_webhooks_refuses_a_timestamp_that_is_not_unix_seconds() -> None:
    key = webhook_key(SW_SECRET)
    signature = sw_mac(key, SW_MSG_ID, "hello", SW_BODY)
    got = standard_refusal(key, SW_MSG_ID, "hello", signature, SW_BODY, SW_NOW)
    assert got == Refusal(
        "webhook-timestamp",
        "the webhook-timestamp header must be a whole number of seconds since 1970-01-01 (Unix "
        "time)",
    )
