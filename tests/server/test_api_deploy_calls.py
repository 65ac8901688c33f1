"""``POST /definitions`` checks a flow's calls against the deployed flows and the file itself: a
bad call is a 422 with the validate items, and stores nothing; on both store backends."""

from __future__ import annotations

import pytest
from api_site import YAML, Site

CALLER = """\
flow: caller
steps:
  - a:
      call: {flow}
      inputs: {inputs}
"""
URL = "/definitions?filename=caller.flow.yaml"


def test_a_call_of_a_deployed_flow_with_its_inputs_deploys(site: Site) -> None:
    done = site.deploy("caller.flow.yaml", CALLER.format(flow="greet", inputs="{ who: x }"))
    assert done.status_code == 201, done.text
    itself = CALLER.format(flow="caller", inputs="{}").replace("caller", "again")
    assert site.deploy("again.flow.yaml", itself + '      if: "{{ false }}"\n').status_code == 201


@pytest.mark.parametrize(
    ("flow", "inputs", "item"),
    [
        ("gret", "{ who: x }", {
            "line": 4, "col": 13, "path": "steps[0].a.call",
            "message": "step [a]: call: no flow [gret] is deployed or validated with this "
                       "file; did you mean [greet]?",
        }),
        ("greet", "{ who: x, times: many }", {
            "line": 5, "col": 32, "path": "steps[0].a.inputs.times",
            "message": "step [a]: input [times] of flow [greet] must be an integer, got a string",
        }),
        ("Manual", "{}", {
            "line": 4, "col": 13, "path": "steps[0].a.call",
            "message": "step [a]: call: [Manual] is an intent process; call starts flows only",
        }),
    ],
)  # fmt: skip
def test_a_bad_call_is_a_422_naming_it_and_stores_nothing(
    site: Site, flow: str, inputs: str, item: dict[str, object]
) -> None:
    text = CALLER.format(flow=flow, inputs=inputs)
    body = site.refused("POST", URL, 422, field=str(item["path"]), content=text, headers=YAML)
    assert body["errors"] == [
        {"field": item["path"], "file": "caller.flow.yaml", "severity": "error", **item}
    ]
