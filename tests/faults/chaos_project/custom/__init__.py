"""Delegates of the chaos and lease-expiry tests. Each attempt appends one line to
``effects.log`` in the project directory before anything else (one ``write``: a line is whole or
absent even under SIGKILL): the outside world's view of what was executed, and by which process.

What a delegate does depends on the record's ``kind`` (see app.intent) and the attempt number
only, so every run's outcome is known in advance whatever the crashes."""

import os
import time

# kind → how many of flaky's attempts fail before one succeeds
FLAKY_FAILURES = {0: 0, 1: 1, 2: 2, 3: 0, 4: 1}


def _effect(ctx):
    line = f"{ctx.run_id} {ctx.step} {ctx.attempt} {ctx.idempotency_key} {os.getpid()}\n"
    fd = os.open(
        os.path.join(ctx.project_dir, "effects.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT
    )
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class First:
    def execute(self, ctx):
        _effect(ctx)
        ctx.record["a"] = "first"


class Flaky:
    def execute(self, ctx):
        _effect(ctx)
        ctx.record["b"] = f"flaky-{ctx.attempt}"
        if ctx.attempt <= FLAKY_FAILURES[ctx.record["kind"]]:
            raise ConnectionError(f"flaky: attempt {ctx.attempt} failed")


class Doomed:
    """Always fails; its final attempt's write commits with the onError route."""

    def execute(self, ctx):
        _effect(ctx)
        ctx.record["c"] = f"doomed-{ctx.attempt}"
        raise RuntimeError(f"doomed: attempt {ctx.attempt} failed")


class Fatal:
    """Always fails, with no onError: the run ends failed; its writes are discarded."""

    def execute(self, ctx):
        _effect(ctx)
        ctx.record["c"] = f"fatal-{ctx.attempt}"
        raise RuntimeError(f"fatal: attempt {ctx.attempt} failed")


class Last:
    def execute(self, ctx):
        _effect(ctx)
        ctx.record["outcome"] = "done"


class Slow:
    """The first execution says so (file ``ready`` holds its pid) and then blocks until the file
    ``release`` exists: a worker to freeze mid-step. Later executions do not block."""

    def execute(self, ctx):
        _effect(ctx)
        ctx.record["a"] = f"slow by {os.getpid()}"
        ready = os.path.join(ctx.project_dir, "ready")
        try:
            fd = os.open(ready, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        release = os.path.join(ctx.project_dir, "release")
        deadline = time.monotonic() + 120
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.01)
