"""Delegates for the crash tests. Each attempt appends one line to ``effects.log`` in the project
directory *before* doing anything else: the outside world's view of what was executed."""

import os


def _effect(ctx):
    with open(os.path.join(ctx.project_dir, "effects.log"), "a") as log:
        log.write(f"{ctx.run_id} {ctx.step} {ctx.attempt} {ctx.idempotency_key} {os.getpid()}\n")


class First:
    def execute(self, ctx):
        _effect(ctx)
        ctx.record["a"] = "first"


class Flaky:
    """Fails its first attempt, succeeds on the second (of three allowed)."""

    def execute(self, ctx):
        _effect(ctx)
        ctx.record["b"] = f"flaky-{ctx.attempt}"
        if ctx.attempt == 1:
            raise ConnectionError("flaky: attempt 1 failed")


class Doomed:
    """Always fails; its final attempt's write commits with the onError route."""

    def execute(self, ctx):
        _effect(ctx)
        ctx.record["c"] = f"doomed-{ctx.attempt}"
        raise RuntimeError(f"doomed: attempt {ctx.attempt} failed")


class Last:
    def execute(self, ctx):
        _effect(ctx)
        ctx.record["outcome"] = "done"
