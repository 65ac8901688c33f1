"""The intent ``parallel`` step at run time: the fork puts a token on each branch, the join
waits for all of them.

The fork's own token parks at the fork (``waiting_for.kind`` ``join``, listing the branches not
yet arrived); each branch token carries the parked token's id. A branch token that reaches its
join ends, and takes its branch off the parked token's list; the last one wakes the parked
token, which goes on at the fork's ``next``. The count is exact without any lock of its own: a
run's tokens are only ever changed by whoever holds the run (a worker's lease, checked in its
commit, or the run row locked by a user's call, which takes the lease away), so two branches of
one run never commit at once.
"""

from __future__ import annotations

from procflow.model.ir import ParallelStep
from procflow.runtime.transition import Transition
from procflow.states import TokenState
from procflow.store.rows import TokenRow

JOIN_WAIT = "join"  # the parked fork token's waiting_for.kind


def fork(tr: Transition, token: TokenRow, step: ParallelStep) -> None:
    """One new token on each branch's first step; ``token`` waits at the join."""
    assert token.id is not None  # a token reaches a fork in one transition, runs it in the next
    tr.add("step.started", step.name, token.path, token.attempt)
    # Two visits of one fork (a loop around it) run each branch step anew: the idempotency key
    # of a branch step tells them apart by the fork token and its visit.
    tag = f"{step.name}.{token.id}.{token.data.get('visit', 0)}"
    for first in step.branches:
        data = {"visit": 1, "join": token.id, "branch": first, "fork": tag}
        branch = TokenRow(None, token.run_id, first, first, TokenState.READY, 1, tr.now, None, data)
        tr.tokens_insert.append(branch)
        tr.add("token.forked", first, first, 1, tr.now, **{"from": step.name})
    token.state = TokenState.WAITING
    token.wait = {"kind": JOIN_WAIT, "branches": list(step.branches)}
    token.since = tr.now
    token.data["steps"] = 0  # a wait state: the loop guard counts steps between waits
    tr.update(token)


def arrive(tr: Transition, tokens: dict[int, TokenRow], token: TokenRow) -> TokenRow | None:
    """``token`` reached its branch's join: it ends. Returns the fork's token when it was the
    last branch to arrive (ready again, to go on after the join), else None. A token that
    belongs to no branch (a user task's reminder path inside one) just ends."""
    if token.id is not None:
        tr.tokens_delete.append(token.id)
        tr.timers_drop.append(token.id)
        tokens.pop(token.id, None)
    parent = tokens.get(token.data.get("join", -1))
    branch = token.data.get("branch")
    if parent is None or parent.wait is None or branch not in parent.wait.get("branches", ()):
        tr.add("token.ended", token.step, token.path, token.attempt)
        return None
    waiting = [b for b in parent.wait["branches"] if b != branch]
    tr.add("token.joined", parent.step, parent.path, None, branch=branch, waiting=waiting)
    if waiting:
        parent.wait = {"kind": JOIN_WAIT, "branches": waiting}
        tr.update(parent)
        return None
    parent.state, parent.wait, parent.attempt = TokenState.READY, None, 1
    tr.add("step.completed", parent.step, parent.path, parent.attempt)
    tr.update(parent)
    return parent
