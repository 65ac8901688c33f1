"""Who may read and write an intent application's records: its ``permissions:`` block.

An entity some permission names is read and written by the roles granted each action (and
administrators); any other entity is read by every signed-in user and written by operators and
the roles above them. Runs write records as the engine, never as whoever started them, so none of
this applies inside a run. A refusal names the roles that would be allowed.
"""

from __future__ import annotations

from procflow.errors import NotPermittedError
from procflow.model.ir import Application, RecordAction
from procflow.runtime.data.access import Role, having
from procflow.runtime.data.identity import Actor

__all__ = ["authorize_record", "may_record", "record_roles"]


def record_roles(app: Application, entity: str, action: RecordAction) -> frozenset[str]:
    """The roles that may do ``action`` on ``entity``'s records, besides administrators; for an
    entity no permission names: everyone may read (an empty set), operators and up may write."""
    if entity in app.guarded_entities():
        return app.roles_for(entity, action)
    if action is RecordAction.READ:
        return frozenset()
    return frozenset({Role.OPERATOR.value, Role.DEPLOYER.value})


def may_record(actor: Actor, app: Application, entity: str, action: RecordAction) -> bool:
    if actor.is_admin:
        return True
    if entity not in app.guarded_entities() and action is RecordAction.READ:
        return True
    return bool(record_roles(app, entity, action) & actor.roles)


def authorize_record(actor: Actor, app: Application, entity: str, action: RecordAction) -> None:
    """Refuse ``action`` on ``entity``'s records unless ``actor`` may (module notes)."""
    if may_record(actor, app, entity, action):
        return
    if entity not in app.guarded_entities():
        raise NotPermittedError(
            f"user [{actor.user}] may not {action.value} [{entity}] records: that needs the "
            f"role [{Role.OPERATOR}] (or one above it){having(actor)}",
            user=actor.user,
            roles=(Role.OPERATOR.value,),
            entity=entity,
        )
    roles = [*sorted(record_roles(app, entity, action)), Role.ADMIN.value]
    listed = ", ".join(roles)
    needs = f"the role [{listed}]" if len(roles) == 1 else f"one of the roles [{listed}]"
    raise NotPermittedError(
        f"user [{actor.user}] may not {action.value} [{entity}] records: that needs {needs}"
        f"{having(actor)}",
        user=actor.user,
        roles=tuple(roles),
        entity=entity,
    )
