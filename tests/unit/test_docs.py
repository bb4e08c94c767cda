"""The protocol reference is generated from the code; it must not drift."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_protocol_reference_is_current():
    run = subprocess.run([sys.executable, "docs/gen_protocol.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_every_verb_is_documented():
    from arbiter.verbs import VERBS

    text = (ROOT / "docs" / "protocol.md").read_text()
    missing = [name for name in VERBS if f"### `{name}`" not in text]
    assert not missing
