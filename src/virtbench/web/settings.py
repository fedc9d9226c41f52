"""What one web app instance needs to know, passed explicitly (tests build their own)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_BODY_BYTES = 1 << 20
"""Any request body: a campaign is a few hundred bytes; nothing the app accepts is larger."""
MAX_CAMPAIGN_BYTES = 256 << 10
"""An uploaded or pasted campaign YAML (the CLI's own limit for files is larger: files are trusted)."""


@dataclass(frozen=True)
class Settings:
    db_url: str | None
    token: str
    """Needed for every state change (schedule, cancel, delete); reads are open unless private."""
    private: bool = False
    """Reads need the token too (a login), for a store whose results are not for everyone."""
    allowed_hosts: tuple[str, ...] = ("*",)
    """Host headers accepted; bound to loopback, only loopback names (stops DNS rebinding)."""
    secure_cookies: bool = False
    """Mark cookies Secure (set when served behind HTTPS)."""
    session_hours: float = 12.0
    max_body_bytes: int = MAX_BODY_BYTES
    max_campaign_bytes: int = MAX_CAMPAIGN_BYTES
    allowed_paths: tuple[Path, ...] = ()
    """Directories (resolved) under which a request's campaign may name files of this host:
    inventories, keys, rootfs archives, migration destinations (web.hostpaths); none by default."""
    allow_meter: bool = False
    """Campaigns may name an energy meter command (it runs as root): only with `serve --allow-meter`."""
    worker_hint: str = "virtbench worker"
    """How the pages tell a user to start a worker when none is alive."""


def loopback_hosts(bind: str, port: int) -> tuple[str, ...]:
    """Host headers to accept: loopback names when bound to loopback, anything otherwise."""
    if bind in ("127.0.0.1", "localhost", "::1"):
        return ("127.0.0.1", "localhost", "[::1]", "::1")
    return ("*",)
