"""The provisioning example's delegates, with the generated password known to the test.

The password comes from ``PROCFLOW_TEST_PASSWORD``. These delegates are as careless with it as a
delegate can be: they log it, and put it in their exception messages. procflow must keep it out
of everything it stores or prints anyway. The tenant's title steers them:

- ``schema-leak``: createSchema's first attempt sets the var, then fails with the password in its
  message (that attempt's var write is discarded);
- ``app-flaky-N``: provisionApp's first N attempts fail, with the password in the message;
- ``refused``: provisionApp always fails, with the password in the message (→ onError → {error}).
"""

import os


def _count(title, word):
    return int(title.split(f"{word}-")[1].split()[0]) if f"{word}-" in title else 0


class SchemaProvisioner:
    def execute(self, ctx):
        password = os.environ["PROCFLOW_TEST_PASSWORD"]
        ctx.vars["dbPassword"] = password
        ctx.log.info("schema created; its password is %s", password)
        if "schema-leak" in ctx.record["title"] and ctx.attempt == 1:
            raise ConnectionError(f"schema service hung up after password {password} was set")


class AppProvisioner:
    def execute(self, ctx):
        password = ctx.vars["dbPassword"]
        if password != os.environ["PROCFLOW_TEST_PASSWORD"]:
            raise ValueError("dbPassword does not hold the generated password")
        ctx.log.warning("logging in with %s", password)
        title = ctx.record["title"]
        if "refused" in title or ctx.attempt <= _count(title, "app-flaky"):
            raise PermissionError(f"login refused for password {password} (attempt {ctx.attempt})")
