"""Every setting procflow reads from its environment, read in this one place.

A setting is declared once in :data:`SETTINGS` (its variable, default and meaning); the CLI shows a
flag's variable in ``--help`` from here, and :class:`Config` is the parsed, typed view the engine
and the faces are given. Nothing else in the package reads ``os.environ`` for a ``PROCFLOW_*``
variable: a test or an embedding program passes its own mapping to :meth:`Config.from_environ`.

Connector settings (``SLACK_TOKEN``, ``SLACK_BASE_URL``) are not here: a connector's manifest
declares the variables its ``config`` reads, and the connector layer resolves them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from procflow.errors import ConfigError

__all__ = [
    "DEFAULT_DATABASE_URL",
    "SETTINGS",
    "Config",
    "Setting",
    "env_name",
    "format_size",
    "parse_size",
    "raw",
    "size_setting",
]

DEFAULT_DATABASE_URL = "sqlite:///./procflow.db"
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class Setting:
    """One environment variable procflow reads."""

    env: str
    default: str | None
    meaning: str


SETTINGS: dict[str, Setting] = {
    s.env: s
    for s in (
        Setting(
            "PROCFLOW_DATABASE_URL", DEFAULT_DATABASE_URL, "the store (sqlite:/// or postgresql://)"
        ),
        Setting("PROCFLOW_PROJECT", None, "where delegates, custom/ and connectors/ live"),
        Setting("PROCFLOW_SECRET_KEY", None, "the key vars are sealed with (32+ characters)"),
        Setting("PROCFLOW_SECRET_KEY_FILE", None, "a file holding the secret key"),
        Setting("PROCFLOW_SECRETS_FILE", None, "NAME=value lines that secret() reads"),
        Setting("PROCFLOW_SMTP_URL", None, "smtp://host:port for notify and email.send"),
        Setting("PROCFLOW_SMTP_FROM", None, "the From address of sent mail"),
        Setting("PROCFLOW_LEASE_SECONDS", "30", "how long a worker holds a claimed run"),
        Setting("PROCFLOW_STEP_TIMEOUT", "5m", "the longest an attempt may run (a duration)"),
        Setting("PROCFLOW_STOP_TIMEOUT", "30s", "how long a graceful stop waits (a duration)"),
        Setting("PROCFLOW_SLOTS", "4", "threads a worker moves slow attempts' queued runs to"),
        Setting(
            "PROCFLOW_MAX_FILE_SIZE", "10MiB", "the largest definition file read (bytes, KiB, MiB)"
        ),
        Setting(
            "PROCFLOW_MAX_RESULT_SIZE", "1MiB", "the largest action result a run keeps (as JSON)"
        ),
        Setting("PROCFLOW_FAULTS", None, "fault points that kill the process (crash tests)"),
        Setting("PROCFLOW_API_TOKENS", None, "token=user:role,role;... for the HTTP API"),
        Setting("PROCFLOW_API_TOKENS_FILE", None, "a file of token=user:roles lines"),
        Setting("PROCFLOW_OIDC_ISSUER", None, "the OpenID Connect issuer whose JWTs are taken"),
        Setting("PROCFLOW_OIDC_JWKS", None, "the issuer's keys: a JWKS URL or file (discovery)"),
        Setting("PROCFLOW_OIDC_AUDIENCE", None, "what a JWT's aud must hold (needs the issuer)"),
        Setting(
            "PROCFLOW_OIDC_USER_CLAIM", None, "the claim naming the user (preferred_username, sub)"
        ),
        Setting("PROCFLOW_OIDC_ROLES_CLAIM", "roles", "the claim (a dotted path) of the roles"),
        Setting("PROCFLOW_WEBHOOK_SECRET", None, "the Standard Webhooks signing secret"),
        Setting("PROCFLOW_LOG_FORMAT", "text", "text or json"),
    )
}


def env_name(key: str) -> str:
    """The variable of a declared setting (a typo here is a bug, so it fails loudly)."""
    return SETTINGS[key].env


def raw(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The text of the declared setting ``name`` in ``environ`` (default: this process's
    environment); an empty variable counts as unset. Every ``PROCFLOW_*`` read goes through here."""
    value = (os.environ if environ is None else environ).get(env_name(name))
    return value if value else None


@dataclass(frozen=True)
class Config:
    """The settings of one engine or command, parsed from an environment once."""

    database_url: str = DEFAULT_DATABASE_URL
    project_dir: str | None = None
    secret_key: str | None = None
    secret_key_file: str | None = None
    secrets_file: str | None = None
    smtp_url: str | None = None
    smtp_from: str | None = None
    lease_seconds: float = 30.0
    # Durations stay text here (this module sits below the expression language that parses
    # them); the engine and the CLI read them with ``procflow.expr.parse_duration``.
    step_timeout: str = "5m"
    stop_timeout: str = "30s"
    slots: int = 4
    max_file_size: int = 10 * MIB
    max_result_size: int = MIB
    faults: str = ""
    api_tokens: str | None = None
    api_tokens_file: str | None = None
    oidc_issuer: str | None = None
    oidc_jwks: str | None = None
    oidc_audience: str | None = None
    oidc_user_claim: str | None = None  # None: preferred_username, else sub
    oidc_roles_claim: str | None = None  # None: roles
    webhook_secret: str | None = None
    log_format: str = "text"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Config:
        def text(name: str) -> str | None:
            return raw(name, environ)

        return cls(
            database_url=text("PROCFLOW_DATABASE_URL") or DEFAULT_DATABASE_URL,
            project_dir=text("PROCFLOW_PROJECT"),
            secret_key=text("PROCFLOW_SECRET_KEY"),
            secret_key_file=text("PROCFLOW_SECRET_KEY_FILE"),
            secrets_file=text("PROCFLOW_SECRETS_FILE"),
            smtp_url=text("PROCFLOW_SMTP_URL"),
            smtp_from=text("PROCFLOW_SMTP_FROM"),
            lease_seconds=_seconds("PROCFLOW_LEASE_SECONDS", text("PROCFLOW_LEASE_SECONDS"), 30.0),
            step_timeout=text("PROCFLOW_STEP_TIMEOUT") or "5m",
            stop_timeout=text("PROCFLOW_STOP_TIMEOUT") or "30s",
            slots=_count("PROCFLOW_SLOTS", text("PROCFLOW_SLOTS"), 4),
            max_file_size=size_setting("PROCFLOW_MAX_FILE_SIZE", environ),
            max_result_size=size_setting("PROCFLOW_MAX_RESULT_SIZE", environ),
            faults=text("PROCFLOW_FAULTS") or "",
            api_tokens=text("PROCFLOW_API_TOKENS"),
            api_tokens_file=text("PROCFLOW_API_TOKENS_FILE"),
            oidc_issuer=text("PROCFLOW_OIDC_ISSUER"),
            oidc_jwks=text("PROCFLOW_OIDC_JWKS"),
            oidc_audience=text("PROCFLOW_OIDC_AUDIENCE"),
            oidc_user_claim=text("PROCFLOW_OIDC_USER_CLAIM"),
            oidc_roles_claim=text("PROCFLOW_OIDC_ROLES_CLAIM"),
            webhook_secret=text("PROCFLOW_WEBHOOK_SECRET"),
            log_format=_choice(
                "PROCFLOW_LOG_FORMAT", text("PROCFLOW_LOG_FORMAT"), ("text", "json")
            ),
        )


def _seconds(name: str, raw: str | None, default: float) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"{name} must be a number of seconds, not [{raw}]", setting=name
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a positive number of seconds, not [{raw}]", setting=name)
    return value


def _count(name: str, raw_text: str | None, default: int) -> int:
    if raw_text is None:
        return default
    if not raw_text.isdigit() or not 1 <= int(raw_text) <= 256:
        raise ConfigError(
            f"{name} must be a whole number from 1 to 256, not [{raw_text}]", setting=name
        )
    return int(raw_text)


_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "kib": KIB,
    "mb": 1000**2,
    "mib": MIB,
    "gb": 1000**3,
    "gib": GIB,
}


def parse_size(text: str, name: str) -> int:
    """``10MiB``, ``512KiB``, ``2MB`` or a number of bytes → bytes (a unit's case is not
    significant); ``name`` (the flag or variable) is named when ``text`` is not a size."""
    found = _SIZE.match(text)
    if found is None or int(found.group(1)) == 0:
        raise ConfigError(
            f"{name} must be a positive size like 10MiB, 512KiB or 4096 (bytes), not [{text}]",
            setting=name,
        )
    return int(found.group(1)) * _UNITS[(found.group(2) or "").lower()]


def format_size(size: int) -> str:
    """``10 MiB``, ``1.5 KiB`` or ``300 bytes``, for messages."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} bytes"


def size_setting(name: str, environ: Mapping[str, str] | None = None) -> int:
    """The declared size setting ``name`` in bytes (its default when unset)."""
    text = raw(name, environ) or SETTINGS[name].default
    assert text is not None  # every size setting has a default
    return parse_size(text, name)


def _choice(name: str, raw: str | None, allowed: tuple[str, ...]) -> str:
    if raw is None:
        return allowed[0]
    if raw not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, not [{raw}]", setting=name)
    return raw
