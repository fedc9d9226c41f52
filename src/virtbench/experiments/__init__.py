"""Experiment kinds: what a campaign does with its platforms.

The default kind, `benchmarks`, runs every benchmark on every platform (the classic
campaign). Other kinds (`line`, `density`, `migration`, or a third party's) are selected by
the campaign key `experiment: NAME` and configured by a section of the same name, declared
as a pydantic model by the kind and validated with the rest of the campaign. See `base.py`
for the interface and `registry.py` for how kinds are found.
"""
