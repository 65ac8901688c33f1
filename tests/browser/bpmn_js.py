"""bpmn-js, the bpmn.io toolkit Camunda Modeler is built on, for the BPMN export's tests.

A test-only npm package: ``bpmn-js/package.json`` pins it and ``package-lock.json`` pins what it
brings (integrity hashes); ``npm ci`` installs it into ``bpmn-js/node_modules`` (ignored by git).
``make test`` runs that before the suite; a test that finds it missing runs it itself (under a
file lock: two test processes may get there at once). Without npm the tests fail saying so: they
never skip. The modeler bundle is evaluated in the page through the DevTools protocol, as axe is.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent / "bpmn-js"
BUNDLE = PACKAGE / "node_modules" / "bpmn-js" / "dist" / "bpmn-modeler.production.min.js"
INSTALL = ["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(PACKAGE)]


def ensure_installed() -> Path:
    if BUNDLE.is_file():
        return BUNDLE
    if shutil.which("npm") is None:
        pytest.fail(
            "the BPMN tests need bpmn-js from npm, and npm is not installed: `apt-get install "
            f"npm` (scripts/ensure-system.sh does), then `{' '.join(INSTALL)}`. They never skip.",
            pytrace=False,
        )
    with open(PACKAGE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not BUNDLE.is_file():
            done = subprocess.run(INSTALL, capture_output=True, text=True, check=False)
            if done.returncode != 0 or not BUNDLE.is_file():
                pytest.fail(f"`{' '.join(INSTALL)}` failed:\n{done.stderr[-4000:]}", pytrace=False)
    return BUNDLE


@cache
def modeler_source() -> str:
    return ensure_installed().read_text(encoding="utf-8")


# Imports ``xml`` into a fresh modeler: its warnings (bpmn-moddle's and the importer's), or the
# error it was refused with, and the ids of the elements it drew.
IMPORT = """async (xml) => {
  const host = document.createElement('div');
  host.style.width = '1200px';
  host.style.height = '900px';
  document.body.appendChild(host);
  const modeler = new BpmnJS({ container: host });
  try {
    const result = await modeler.importXML(xml);
    const drawn = modeler.get('elementRegistry').getAll().map((e) => e.id);
    return { warnings: result.warnings.map((w) => String(w.message)), drawn, error: null };
  } catch (err) {
    const warnings = (err.warnings || []).map((w) => String(w.message));
    return { warnings, drawn: [], error: String(err) };
  }
}"""


# The same, then the drawing as bpmn-js saves it (``saveSVG``: the diagram's own bounding box, so
# neither the host's size nor the zoom changes it).
SAVE_SVG = """async (xml) => {
  const host = document.createElement('div');
  host.style.width = '1200px';
  host.style.height = '900px';
  document.body.appendChild(host);
  const modeler = new BpmnJS({ container: host });
  const result = await modeler.importXML(xml);
  const { svg } = await modeler.saveSVG();
  host.remove();
  return { warnings: result.warnings.map((w) => String(w.message)), svg };
}"""

# An arrowhead's marker id, where it is declared and where a flow's style points at it.
_MARKER = re.compile(r"""(id="|url\('#)marker-([a-z0-9]+)""")


def stable_markers(svg: str) -> str:
    """``svg`` with its arrowheads' marker ids numbered in order of appearance: bpmn-js gives
    each a random name anew at every drawing, the only part of ``saveSVG`` that changes between
    two drawings of the same file."""
    numbers: dict[str, int] = {}

    def numbered(found: re.Match[str]) -> str:
        number = numbers.setdefault(found.group(2), len(numbers) + 1)
        return f"{found.group(1)}marker-{number}"

    return _MARKER.sub(numbered, svg)


# What of a drawing depends on the host's fonts: how bpmn-js breaks a label into lines and where it
# puts each (it measures the text), and so the drawing's bounding box.
_LABEL = re.compile(r"(<text\b[^>]*>)(.*?)(</text>)", re.S)
_BOX = re.compile(r'(<svg\b[^>]*?) width="[^"]*" height="[^"]*" viewBox="[^"]*"')


def without_font_metrics(svg: str) -> str:
    """``svg`` less what another chromium or font version would place differently: each label
    only its words, run together; the shapes, flows and ids stay (they come from the export)."""
    svg = _LABEL.sub(lambda m: m[1] + re.sub(r"<[^>]*>|\s", "", m[2]) + m[3], svg)
    return _BOX.sub(lambda m: m[1], svg)
