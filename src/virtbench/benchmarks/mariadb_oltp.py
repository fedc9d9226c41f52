"""MariaDB under sysbench oltp_read_write: the MySQL OLTP test of the Docker-on-Pi study
(seeds/001: 1M / 2M rows, a thread sweep), with MariaDB as Debian's MySQL.

Server: a fixed shell script, values as positional arguments (never pasted into the script
text): `mariadb-install-db` creates a fresh data directory in the workdir, then `mariadbd`
runs in the foreground on 0.0.0.0:PORT with --skip-grant-tables. That means no users and no
passwords: nothing secret is generated or stored, and any client that reaches the port is
root. Acceptable for a throwaway benchmark database that lives only for one execution on the
benchmark network; never point this at a database that matters. An --init-file creates the
`sbtest` schema. mariadb-install-db runs with --force: without it, it stops where the host
name does not resolve ("Neither host 'vm' nor 'localhost' could be looked up with
'/usr/bin/resolveip'", a minbase chroot has no /etc/hosts); with skip-grant-tables the host
names in the grant tables do not matter. The Unix socket path is relative (created in the data directory, where
mariadbd changes to), so long workdir paths cannot hit the 108-byte sun_path limit. Apart
from --innodb-buffer-pool-size (default 128 MiB, MariaDB's own default) the server keeps
MariaDB's defaults, including durable commits (innodb_flush_log_at_trx_commit=1): the
numbers include fsync cost, i.e. the storage stack of the platform.

Client: a fixed script runs `sysbench oltp_read_write ... prepare` (output to stderr, not
timed, not parsed) and then `... run`, whose stdout is parsed. sysbench 1.0.20's prepare
with --threads > 1 exits 0 even when it cannot connect ("FATAL: unable to connect to MySQL
server ..."), so the script also fails on any FATAL line in the prepare output. Default placement: both ends
in the instance (the database and its client inside the container, as in the study); the
other placements work too (client on the host = a remote application server).
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from ..errors import ParseError
from .base import Metric, PairBenchmark, PairParams, Params, search

SERVER_SCRIPT = r"""set -eu
dir=$1 port=$2 pool_mb=$3
# A fresh server and database every execution. An instance serves several executions; the
# runner stops each server inside its instance (platforms/background.py), and this is a second
# guard: a server still holding the port (and its tables) from an earlier execution, found by
# its pid kept per port in /tmp, is stopped here first (at most 30 s, then killed), only if that
# pid is still a mariadbd (never another process that reused the number).
pidfile=/tmp/virtbench-mariadbd-$port.pid
if [ -s "$pidfile" ]; then
    old=$(cat "$pidfile")
    if [ "$(cat "/proc/$old/comm" 2>/dev/null)" = mariadbd ]; then
        kill "$old" 2>/dev/null || true
        i=0
        while kill -0 "$old" 2>/dev/null && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$old" 2>/dev/null || true
    fi
fi
rm -rf "$dir/data"
mkdir -p "$dir/data"
# --force: skip the host name lookup, which fails where there is no /etc/hosts (a bare chroot).
if ! mariadb-install-db --no-defaults --datadir="$dir/data" --user=root --skip-test-db --force \
        >"$dir/install-db.log" 2>&1; then
    cat "$dir/install-db.log" >&2
    exit 1
fi
printf 'CREATE DATABASE IF NOT EXISTS sbtest;\n' > "$dir/init.sql"
exec mariadbd --no-defaults --user=root --datadir="$dir/data" --socket=mysqld.sock \
    --pid-file="$pidfile" --bind-address=0.0.0.0 --port="$port" --skip-grant-tables \
    --skip-name-resolve --init-file="$dir/init.sql" --innodb-buffer-pool-size="${pool_mb}M"
"""

CLIENT_SCRIPT = r"""set -eu
host=$1 port=$2 tables=$3 rows=$4 threads=$5 seconds=$6
set -- oltp_read_write --db-driver=mysql --mysql-host="$host" --mysql-port="$port" \
    --mysql-user=root --mysql-db=sbtest --tables="$tables" --table-size="$rows"
# sysbench 1.0.20 prepare with --threads > 1 exits 0 even when it could not connect: look for FATAL.
# Refused connections (error 2002) are retried for up to 60 s: the port can have been open
# for a moment on the previous execution's server, which the new server's start stops.
tries=0
while :; do
    status=0
    out=$(sysbench "$@" --threads="$threads" prepare 2>&1) || status=$?
    case $out in *"error 2002"*) if [ "$tries" -lt 60 ]; then tries=$((tries + 1)); sleep 1; continue; fi ;; esac
    break
done
printf '%s\n' "$out" >&2
case $out in *FATAL:*) status=1 ;; esac
if [ "$status" -ne 0 ]; then
    echo "sysbench prepare failed (status $status)" >&2
    exit 1
fi
exec sysbench "$@" --threads="$threads" --time="$seconds" --events=0 --percentile=95 run
"""

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_FATAL = r"^FATAL:.*$"
_TRANSACTIONS = rf"^\s*transactions:\s*([0-9]+)\s+\({_NUM} per sec\.\)\s*$"
_QUERIES = rf"^\s*queries:\s*([0-9]+)\s+\({_NUM} per sec\.\)\s*$"
_TOTAL_TIME = rf"^\s*total time:\s*{_NUM}s\s*$"
_EVENTS = r"^\s*total number of events:\s*([0-9]+)\s*$"
_LAT_SUM = rf"^\s*sum:\s*{_NUM}\s*$"
_LAT_P95 = rf"^\s*95th percentile:\s*{_NUM}\s*$"


class MariadbOltpParams(PairParams):
    client: Literal["instance", "host"] = Field("instance", description="sysbench runs in the instance by default")
    server: Literal["peer", "host", "instance"] = Field("instance", description="mariadbd in the instance by default")
    tables: int = Field(1, ge=1, le=1000, description="sbtest tables (--tables)")
    table_size: int = Field(10000, ge=1, le=100_000_000, description="rows per table; study: 1000000 / 2000000")
    threads: int = Field(2, ge=1, le=1024, description="client threads (--threads); the study sweeps them")
    time: int = Field(5, ge=1, le=3600, description="seconds of the timed run (prepare not included)")
    buffer_pool_mb: int = Field(128, ge=8, le=1_048_576, description="--innodb-buffer-pool-size in MiB")
    port: int = Field(3306, ge=1, le=65535, description="mariadbd TCP port")


class MariadbOltp(PairBenchmark):
    """Transactions and queries per second, transaction latency of sysbench oltp_read_write."""

    name: ClassVar[str] = "mariadb-oltp"
    tool: ClassVar[str] = "sysbench"
    packages: ClassVar[tuple[str, ...]] = ("mariadb-server", "sysbench")
    Params: ClassVar[type[Params]] = MariadbOltpParams
    description: ClassVar[str] = "MariaDB + sysbench oltp_read_write: transactions/s, queries/s, latency"
    study: ClassVar[dict[str, Any]] = {"table_size": 1000000, "time": 60}
    """The `full` profile: Docker-on-Pi study: 1M (and 2M) rows."""
    listen_timeout: ClassVar[float] = 180.0  # mariadb-install-db + start; minutes under emulation

    params: MariadbOltpParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"{p.tables} x {p.table_size} rows, {p.threads} thread(s), {p.time} s"
        return [
            Metric("transactions_per_second", "transactions/s", True, "application",
                   f"oltp_read_write transactions (20 queries each), {ctx}"),
            Metric("queries_per_second", "queries/s", True, "application", f"all queries, {ctx}"),
            Metric("latency_avg", "ms", False, "application", f"mean transaction time (sum / events), {ctx}"),
            Metric("latency_p95", "ms", False, "application", f"95th percentile transaction time, {ctx}"),
        ]

    def port(self) -> int:
        return self.params.port

    def server_command(self, workdir: str) -> list[str]:
        p = self.params
        return ["sh", "-c", SERVER_SCRIPT, "sh", workdir, str(p.port), str(p.buffer_pool_mb)]

    def client_command(self, workdir: str, server: str) -> list[str]:
        p = self.params
        return ["sh", "-c", CLIENT_SCRIPT, "sh", server, str(p.port), str(p.tables), str(p.table_size),
                str(p.threads), str(p.time)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        for text in (stdout, stderr):
            fatal = re.search(_FATAL, text, re.M)
            if fatal:
                raise ParseError(self.tool, f"no line like {_FATAL!r} (found {fatal.group(0)!r})", source)

        def grab(pattern: str) -> re.Match[str]:
            return search(pattern, stdout, self.tool, source, re.M)

        grab(_TOTAL_TIME)  # only printed once the run completed
        events = int(grab(_EVENTS).group(1))
        transactions = grab(_TRANSACTIONS)
        if events <= 0 or int(transactions.group(1)) <= 0:
            raise ParseError(self.tool, f"{_TRANSACTIONS!r} with at least one transaction", source)
        # The printed "avg:" has two decimals; sum / events keeps the resolution.
        return {
            "transactions_per_second": float(transactions.group(2)),
            "queries_per_second": float(grab(_QUERIES).group(2)),
            "latency_avg": float(grab(_LAT_SUM).group(1)) / events,
            "latency_p95": float(grab(_LAT_P95).group(1)),
        }

    def version_command(self) -> list[str]:
        return ["sh", "-c", "sysbench --version && mariadbd --version"]

    def execution_timeout(self) -> float:
        p = self.params
        prepare = 60.0 + p.tables * p.table_size / 5000.0  # generous: ~20k rows/s seen on x86
        return prepare + 2.0 * p.time + 60.0
