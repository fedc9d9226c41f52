"""The one iptables rule virtbench adds: let traffic pass between two ports of vbbr0."""
from __future__ import annotations

from .. import proc

BRIDGE = "vbbr0"
"""The host bridge's name (bridge.py creates it; here because the rule names it)."""
FORWARD_RULE = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"]
"""Docker sets the FORWARD policy to DROP, and with br_netfilter that also drops traffic between
two ports of any Linux bridge: instance-to-instance on vbbr0 needs this rule first."""


def allow_forwarding() -> None:
    """Insert the vbbr0 FORWARD accept rule once (no-op without iptables)."""
    if not proc.which("iptables"):
        return
    if proc.run(["iptables", "-C", *FORWARD_RULE], timeout=30, check=False).ok:
        return
    proc.run(["iptables", "-I", *FORWARD_RULE], timeout=30, check=False)


def drop_forwarding() -> None:
    if proc.which("iptables"):
        while proc.run(["iptables", "-D", *FORWARD_RULE], timeout=30, check=False).ok:
            pass
