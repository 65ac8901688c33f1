"""Benchmark: validating large generated definition files.

- a 2,000-step flow file (target: under 1 s): each step references earlier ones through
  expressions, so name resolution does real work;
- an intent file whose one entity has 50,000 fields (target: under 2 s): every check over an
  entity's fields (duplicate names, did-you-mean suggestions) must stay linear in their number.

Run: `make bench` or `.venv/bin/python bench/validate_large.py [--steps N] [--fields N]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from procflow.model.validate import load_file


def flow_text(steps: int) -> str:
    lines = [
        "flow: generated",
        "inputs:",
        "  customer: { type: object, required: true }",
        "  limit: { type: integer, default: 10 }",
        "steps:",
    ]
    for i in range(steps):
        if i % 4 == 0:
            lines.append(f'  - s{i}: {{ set: {{ n: "{{{{ limit + {i} }}}}" }} }}')
        elif i % 4 == 1:
            message = f"{{{{ customer.name }}}} at {{{{ s{i - 1}.n }}}}"
            lines.append(f'  - s{i}: {{ log.write: {{ message: "{message}" }} }}')
        elif i % 4 == 2:
            lines.append(f"  - s{i}:")
            lines.append(f'      if: "{{{{ s{i - 2}.n > 3 and customer.vip | default(false) }}}}"')
            lines.append("      steps:")
            lines.append(f'        - s{i}_inner: {{ log.write: {{ message: "inner {i}" }} }}')
        else:
            lines.append(f"  - s{i}:")
            lines.append("      http.request:")
            lines.append(f'        url: "https://example.test/items/{{{{ s{i - 3}.n }}}}"')
            lines.append("        method: GET")
            lines.append("      retry: { count: 3, every: 30s }")
    return "\n".join(lines) + "\n"


def wide_intent_text(fields: int) -> str:
    """One entity of ``fields`` fields (plus its key), and a process that sets the last one."""
    lines = [
        "name: wide",
        "entities:",
        "  - name: Wide",
        "    fields:",
        "      - { name: id, type: integer, primaryKey: true, generated: true }",
    ]
    lines += [f"      - {{ name: f{i}, type: string, length: 50 }}" for i in range(fields)]
    lines += [
        "processes:",
        "  - name: FillLast",
        "    trigger: { onCreate: Wide }",
        "    steps:",
        f"      - {{ name: fill, kind: serviceTask, args: {{ setField: f{fields - 1}, "
        "value: \"'done'\" } }",
    ]
    return "\n".join(lines) + "\n"


def timed_load(path: Path, repeat: int) -> list[float]:
    """Seconds per validation of ``path``; exits when the generated file is not valid."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        loaded = load_file(str(path))
        times.append(time.perf_counter() - start)
    errors = [d for d in loaded.diagnostics if d.severity == "error"]
    if errors:
        raise SystemExit(f"the generated file should be valid, got: {errors[0].format()}")
    return times


def report(what: str, path: Path, times: list[float], target_ms: int) -> None:
    print(
        f"validated {what} ({path.stat().st_size / 1024:.0f} KiB): "
        f"median {statistics.median(times) * 1000:.0f} ms, best {min(times) * 1000:.0f} ms "
        f"over {len(times)} runs (target < {target_ms} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000, help="steps of the flow (2,000)")
    parser.add_argument(
        "--fields", type=int, default=50_000, help="fields of the wide entity (50,000)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        flow = Path(tmp) / "generated.flow.yaml"
        flow.write_text(flow_text(args.steps))
        report(f"a {args.steps}-step flow", flow, timed_load(flow, args.repeat), 1000)
        wide = Path(tmp) / "wide.intent"
        wide.write_text(wide_intent_text(args.fields))
        times = timed_load(wide, args.repeat)
        report(f"an entity of {args.fields} fields", wide, times, 2000)


if __name__ == "__main__":
    main()
