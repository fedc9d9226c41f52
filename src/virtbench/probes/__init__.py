"""Probes: what happened on the host (and in each instance) while an execution ran."""
