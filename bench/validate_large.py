"""Benchmark: validating a generated 2,000-step flow file (target: under 1 s).

Each step references earlier ones through expressions, so name resolution does real work.
Run: `make bench` or `.venv/bin/python bench/validate_large.py [--steps N]`.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "generated.flow.yaml"
        path.write_text(flow_text(args.steps))
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            loaded = load_file(str(path))
            times.append(time.perf_counter() - start)
        errors = [d for d in loaded.diagnostics if d.severity == "error"]
        if errors:
            raise SystemExit(f"the generated file should be valid, got: {errors[0].format()}")
        size = path.stat().st_size
    print(
        f"validated a {args.steps}-step flow ({size / 1024:.0f} KiB): "
        f"median {statistics.median(times) * 1000:.0f} ms, best {min(times) * 1000:.0f} ms "
        f"over {args.repeat} runs (target < 1000 ms)"
    )


if __name__ == "__main__":
    main()
