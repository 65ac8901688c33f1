"""Run ids: what ``new_run_id`` gives, and what a filter taking a run id accepts."""

from __future__ import annotations

import os

from procflow.runtime import transition
from procflow.runtime.transition import is_run_id, new_run_id


def test_ids_made_in_one_millisecond_sort_in_the_order_they_were_made() -> None:
    # Thousands of ids come in a few milliseconds: a random suffix alone would order those of
    # one millisecond at random (the children of one transition listed in either order).
    made = [new_run_id() for _ in range(5000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert all(is_run_id(i) for i in made)


def test_a_run_id_is_32_lowercase_hexadecimal_digits() -> None:
    assert is_run_id("0123456789abcdef0123456789abcdef")
    for text in ("", "nope", "0" * 31, "0" * 33, "A" * 32, "0" * 32 + "\n", " " + "0" * 31):
        assert not is_run_id(text), text


def test_a_forked_process_does_not_go_on_from_its_parents_last_id() -> None:
    # Two workers forked from one process would otherwise both make "the last id + 1".
    ahead = int("f" * 32, 16) - 10  # a last id far in the future: the next one follows it
    transition._last_id[0] = ahead
    assert int(new_run_id(), 16) == ahead + 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id is of its own clock, not the parent's last + 1
        os.write(write, new_run_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    made = os.read(read, 64).decode()
    os.close(read)
    os.close(write)
    transition._last_id[0] = 0
    assert is_run_id(made) and int(made, 16) < ahead
