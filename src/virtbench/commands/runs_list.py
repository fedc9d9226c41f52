"""`virtbench runs`: the runs in the store, newest first, with a header (or as JSON)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from .shared import console

HEADER = f"{'run':<20}  {'status':<11} {'name':<20} {'created (UTC)':<16}  platforms"


def run_doc(r: Any) -> dict[str, Any]:
    return {"id": r.id, "status": r.status, "name": r.name, "created_at": f"{r.created_at:%Y-%m-%dT%H:%M:%S}Z",
            "platforms": len(r.campaign.get("platforms", []))}


def print_runs(runs: Sequence[Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([run_doc(r) for r in runs], indent=2))
        return
    console.print(HEADER, markup=False, style="bold")
    for r in runs:
        console.print(f"{r.id:<20}  {r.status:<11} {r.name[:20]:<20} {r.created_at:%Y-%m-%d %H:%M}  "
                      f"{len(r.campaign.get('platforms', []))}", markup=False)
