"""`virtbench serve`: the web app (and, unless told otherwise, a queue worker beside it)."""
from __future__ import annotations

import click

from ..extras import require
from .shared import db_option


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 exposes the app to the network.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="TCP port to listen on.")
@click.option("--token", envvar="VIRTBENCH_TOKEN", default=None,
              help="Needed to schedule, cancel or delete (prefer VIRTBENCH_TOKEN: argv is visible in ps). "
                   "A random one is printed if not given.")
@click.option("--private", is_flag=True, envvar="VIRTBENCH_PRIVATE",
              help="Reading needs the token too (a login), not only changes.")
@click.option("--worker/--no-worker", default=True, show_default=True,
              help="Start a worker process with the app (else run `virtbench worker` yourself).")
@click.option("--secure-cookies", is_flag=True, envvar="VIRTBENCH_SECURE_COOKIES",
              help="Mark the login and session cookies Secure: behind an HTTPS reverse proxy.")
@click.option("--allow-path", "allow_paths", multiple=True, metavar="DIR",
              help="Campaigns from the web may name files under DIR (inventories, SSH keys, rootfs archives, "
                   "migration destinations); repeatable. Default: none.")
@click.option("--allow-meter", is_flag=True,
              help="Campaigns from the web may name an energy `meter:` command, which the worker runs as root.")
@db_option
def serve(host: str, port: int, token: str | None, private: bool, worker: bool, secure_cookies: bool,
          allow_paths: tuple[str, ...], allow_meter: bool, db_url: str | None) -> None:
    """Web app: schedule and watch campaigns, verify raw measurements, compare platforms."""
    require("web", "`virtbench serve`")
    from ..web.server import serve as run_server

    run_server(db_url=db_url, host=host, port=port, token=token, private=private, worker=worker,
               secure_cookies=secure_cookies, allow_paths=allow_paths, allow_meter=allow_meter)
