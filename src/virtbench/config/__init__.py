"""The campaign file: declared once here, validated completely before anything starts.

Errors name the file, the field and the fix in one line (`InputError`, exit 2). Platform
options and benchmark parameters are validated by the plugin's own pydantic model, so a
plugin's author declares them in one place. Counts are bounded by arithmetic before anything
is built (budget.py), the file before it is parsed (files.py).
"""
from __future__ import annotations

from .budget import MAX_EXECUTIONS, check_budget, check_host
from .campaign import (
    VALIDATOR_READS,
    Adaptive,
    BenchmarkEntry,
    Campaign,
    ImageSpec,
    ProbeEntry,
    check_field_order,
    cross_host,
    parse_campaign,
)
from .entries import MAX_INSTANCES, MAX_POINTS, MAX_SWEEP_POINTS, NAME_RE, PlatformEntry
from .files import MAX_CAMPAIGN_BYTES, MAX_DEPTH, MAX_NODES, SHIPPED, campaign_path, load_campaign, load_yaml, read_campaign

__all__ = [
    "MAX_CAMPAIGN_BYTES", "MAX_DEPTH", "MAX_EXECUTIONS", "MAX_INSTANCES", "MAX_NODES", "MAX_POINTS",
    "MAX_SWEEP_POINTS", "NAME_RE", "SHIPPED", "VALIDATOR_READS", "Adaptive", "BenchmarkEntry", "Campaign",
    "ImageSpec", "PlatformEntry", "ProbeEntry", "campaign_path", "check_budget", "check_field_order", "check_host",
    "cross_host", "load_campaign", "load_yaml", "parse_campaign", "read_campaign",
]
