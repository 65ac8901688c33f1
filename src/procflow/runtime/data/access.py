"""Who may do what: the one role table every face applies (HTTP, the web UI, the CLI with
``--as``, the Python API with ``user=``), through the engine's calls.

The roles rank: ``operator`` < ``deployer`` < ``admin``. Each may what the one below may, and
more: an operator starts, cancels and retries runs, sends events and triggers schedules; a
deployer also deploys, enables and disables definitions, pauses, resumes and backfills schedules
and purges runs; an administrator may everything, and completes any task. Any signed-in user
reads; completing a task has its own rule (:meth:`~procflow.runtime.data.identity.Actor.
may_complete`).

Records follow their intent file's ``permissions:`` block (:mod:`.record_access`).

A refusal is a :class:`~procflow.errors.NotPermittedError` naming the role it needs, raised
before anything changes.
"""

from __future__ import annotations

from enum import StrEnum

from procflow.errors import NotPermittedError
from procflow.runtime.data.identity import ADMIN_ROLE, Actor

__all__ = [
    "Action",
    "Role",
    "authorize",
    "having",
    "may",
    "role_needed",
]


class Role(StrEnum):
    """The roles the engine knows, lowest first; any other role only matters to tasks and
    record permissions."""

    OPERATOR = "operator"
    DEPLOYER = "deployer"
    ADMIN = ADMIN_ROLE


class Action(StrEnum):
    """What a caller asks to do, worded to complete "may not …"."""

    START = "start runs"
    SEND_EVENT = "send events"
    CANCEL = "cancel runs"
    RETRY = "retry runs"
    TRIGGER_SCHEDULE = "trigger schedules"
    DEPLOY = "deploy definitions"
    ENABLE = "enable or disable definitions"
    PAUSE_SCHEDULE = "pause or resume schedules"
    BACKFILL_SCHEDULE = "backfill schedules"
    PURGE = "purge runs"


_NEEDS: dict[Action, Role] = {
    Action.START: Role.OPERATOR,
    Action.SEND_EVENT: Role.OPERATOR,
    Action.CANCEL: Role.OPERATOR,
    Action.RETRY: Role.OPERATOR,
    Action.TRIGGER_SCHEDULE: Role.OPERATOR,
    Action.DEPLOY: Role.DEPLOYER,
    Action.ENABLE: Role.DEPLOYER,
    Action.PAUSE_SCHEDULE: Role.DEPLOYER,
    Action.BACKFILL_SCHEDULE: Role.DEPLOYER,
    Action.PURGE: Role.DEPLOYER,
}
_RANK = {Role.OPERATOR: 1, Role.DEPLOYER: 2, Role.ADMIN: 3}


def role_needed(action: Action) -> Role:
    """The lowest role that may do ``action`` (the UI names it on a disabled button)."""
    return _NEEDS[action]


def _rank(actor: Actor) -> int:
    return max((_RANK[Role(r)] for r in actor.roles if r in _RANK), default=0)


def may(actor: Actor, action: Action) -> bool:
    return _rank(actor) >= _RANK[_NEEDS[action]]


def authorize(actor: Actor, action: Action) -> None:
    """Refuse ``action`` unless ``actor``'s roles allow it."""
    if not may(actor, action):
        role = role_needed(action)
        raise NotPermittedError(
            f"user [{actor.user}] may not {action}: that needs the role [{role}] "
            f"(or one above it){having(actor)}",
            user=actor.user,
            roles=(role.value,),
        )


def having(actor: Actor) -> str:
    """How a refusal ends: the roles the caller has."""
    if not actor.roles:
        return f"; [{actor.user}] has no role"
    return f"; [{actor.user}] has [{', '.join(sorted(actor.roles))}]"
