"""Names every layer shares, in a module that imports nothing of virtbench.

The runner writes them into the store and the report reads them back; keeping them here
lets report/ and web/ use them without importing the runner (dependencies point one way).
"""
from __future__ import annotations

LIFECYCLE = "lifecycle"
"""The pseudo-benchmark under which an instance's create/start/stop/remove times are stored."""
LIFECYCLE_STEPS = ("create", "start", "stop", "remove")
"""Its metrics, in order: `<step>_s` seconds."""

UNREACHED = "not reached:"
"""Error prefix of an execution a lost host never ran: `run --resume` measures these again."""

VERDICT_CONFIDENCE = 0.95
"""The verdict rule's interval for slower/faster (analysis/verdict.py): it must exclude 1.0."""
VERDICT_EQUIVALENCE = 0.90
"""The interval of the 'same' verdict: TOST at 5 % each side (a 1 - 2 alpha interval), within 1 +- the margin."""
