"""virtbench: what does virtualization cost me, here, for my workloads?

The public API is small: load a campaign, open a store, run or resume, summarize.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
