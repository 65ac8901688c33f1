"""Run ids: what ``new_run_id`` gives, and what a filter taking a run id accepts."""

from __future__ import annotations

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
