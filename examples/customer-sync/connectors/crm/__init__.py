"""A stand-in for a CRM: customers are read from a JSON file in the project
({"7": {"name": "Acme", "plan": "gold"}}). Edit the file between syncs to watch a change go
through."""

import json
from pathlib import Path


def customer(ctx, id):
    path = Path(ctx.project_dir) / ctx.config["customers_file"]
    customers = json.loads(path.read_text()) if path.exists() else {}
    found = customers.get(str(id), {"name": f"customer {id}", "plan": "free"})
    return {"id": id, "name": found["name"], "plan": found["plan"]}
