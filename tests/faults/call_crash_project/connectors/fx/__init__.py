"""The fx connector of the call crash test (the flow crash test's, without failures). Each
attempt appends one JSON line to ``effects.jsonl`` in the project folder *before* anything else:
the outside world's view of what was executed (path, attempt, idempotency key, and the process
that executed it).

The answer depends only on the step's path (taken from the idempotency key, ``<run id>/<path>``),
never on how often it was called, so a replayed attempt answers exactly what the first did.
"""

import json
import os


def touch(ctx, tag):
    path = ctx.idempotency_key.partition("/")[2]
    entry = {
        "run_id": ctx.run_id, "path": path, "attempt": ctx.attempt,
        "idempotency_key": ctx.idempotency_key, "pid": os.getpid(),
    }  # fmt: skip
    with open(os.path.join(ctx.project_dir, "effects.jsonl"), "a") as log:
        log.write(json.dumps(entry) + "\n")
    return {"tag": tag, "path": path}
