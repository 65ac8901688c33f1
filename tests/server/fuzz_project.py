"""What both fuzzers of the HTTP API (``test_fuzz.py``, ``test_fuzz_openapi.py``) deploy: an
intent application with a triggered and a trigger-less process (their own flows differ)."""

from __future__ import annotations

INTENT = """\
name: shop
entities:
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
      - { name: total, type: integer }
processes:
  - name: Approve
    trigger: { onCreate: Order }
    steps:
      - { name: check, kind: userTask, args: { assignee: ops } }
  - name: Manual
    steps:
      - { name: look, kind: userTask, args: { assignee: bob } }
"""
