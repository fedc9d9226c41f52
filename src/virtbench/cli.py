"""Command line: builds library objects and prints; no measurement logic lives here."""
from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from . import __version__
from .commands.shared import FiniteRange, console, db_option, errconsole, one_shot, read_store
from .errors import InputError, VirtbenchError, disk_full
from .extras import require


def _paths() -> Any:
    """The state and runtime directories (imported here: `report` and `runs` never need the platforms)."""
    from .images.build import close_cache
    from .platforms.base import Paths

    close_cache()
    return Paths.from_env().make_private()


def _store(db_url: str | None):
    from .store.db import Store

    return Store(db_url)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="virtbench")
def cli() -> None:
    """What does virtualization cost me, here, for my workloads?"""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--wait", is_flag=True, help="If a run is measuring on this host, wait for it instead of refusing.")
@db_option
def doctor(as_json: bool, wait: bool, db_url: str | None) -> None:
    """Which platforms run here (decided by trying), why not, and the host's facts."""
    from . import host
    from .commands.lastprobe import probe_or_last
    from .images.arch import cross_build_report
    from .images.build import DEFAULT_CACHE
    from .platforms import sandboxes, slices
    from .registry import PLATFORMS
    from .runner.session import probe_types
    from .store.db import default_url, redact

    paths = _paths()

    def probe() -> dict[str, Any]:
        verdicts = probe_types(PLATFORMS.names(), paths)
        return {"host": host.facts(), "store": redact(db_url or default_url()), "image_cache": str(DEFAULT_CACHE),
                "platforms": [{"name": n, "kind": PLATFORMS.get(n).kind, "available": v.available,
                               "reason": v.reason, "fix": v.fix} for n, v in verdicts.items()],
                "sandboxes": sandboxes.report(paths), "cross_build": cross_build_report(),
                "host_kind": slices.host_kind()}

    # Probes start tiny instances: never while a run measures here (they would disturb it);
    # then the last probe's answer, with its time.
    doc, probed_at = probe_or_last(paths, "doctor", "`virtbench doctor`", wait, probe)
    doc["probed_at"] = probed_at
    facts = doc["host"]
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    virt = facts["virtualization"]
    console.print(f"[bold]host[/bold] {facts['hostname']}: {facts['cpu_model']}, {facts['cpus']} CPUs, "
                  f"{facts['memory_bytes'] / 2**30:.1f} GiB, {facts['arch']}, kernel {facts['kernel']}")
    console.print(f"  flags: {' '.join(facts['cpu_flags']) or '-'}; AES in hardware: {'yes' if facts['aes'] else 'no'}")
    console.print(f"  governor {facts['governor']}, turbo {facts['turbo']}, cgroup {facts['cgroup']}, "
                  f"virtualized: vm={virt['vm']} container={virt['container']}")
    if doc.get("host_kind"):  # a last probe saved by an older virtbench has none
        console.print(f"  host kind: {doc['host_kind']}", markup=False)
    console.print(f"  results store: {doc['store']}; image cache: {doc['image_cache']}")
    for p in doc["platforms"]:
        mark = "[green]available[/green]" if p["available"] else "[red]not available[/red]"
        console.print(f"[bold]{p['name']:<11}[/bold] {mark}: {p['reason']}"
                      + (f"\n            fix: {p['fix']}" if p["fix"] and not p["available"] else ""))
    _print_sandboxes(doc["sandboxes"])
    console.print("[bold]images for other architectures[/bold] (`image build --arch`)")
    for c in doc["cross_build"]:
        console.print(f"  {c['arch']}: {'[green]can build[/green]' if c['ok'] else '[red]cannot build[/red]'}: "
                      f"{escape(c['reason'])}" + (f"\n    fix: {escape(c['fix'])}" if c["fix"] and not c["ok"] else ""))


def _print_sandboxes(entries: list[dict[str, Any]]) -> None:
    """doctor's sandbox section: each runtime's version, and each mode or engine tried."""
    console.print("[bold]sandboxes[/bold]")
    for s in entries:
        version = s["version"] or "not installed"
        console.print(f"  [bold]{s['name']}[/bold] ({s['what']}) {escape(version)}"
                      + (f", default platform {s['default_mode']}" if s.get("default_mode") else ""))
        parts = [(f"platform {m['mode']}", m) for m in s.get("modes", [])]
        parts += [(f"as a {e} runtime", s[e]) for e in ("docker", "containerd") if e in s]
        if "available" in s:
            parts.append(("", s))
        for what, v in parts:
            mark = "[green]works[/green]" if v["available"] else "[red]does not work[/red]"
            console.print(f"    {what + ': ' if what else ''}{mark}: {escape(v['reason'])}"
                          + (f"\n      fix: {escape(v['fix'])}" if v.get("fix") and not v["available"] else ""))
        if s.get("fix") and not s.get("modes") and "available" not in s:
            console.print(f"    fix: {escape(s['fix'])}")


@cli.group()
def image() -> None:
    """Build and list guest images (one Debian rootfs every platform runs)."""


@image.command("build")
@click.option("--profile", type=click.Choice(["quick", "full"]), default="quick", show_default=True)
@click.option("--release", default="bookworm", show_default=True, help="Debian release.")
@click.option("--arch", default=None, metavar="ARCH",
              help="Debian architecture (arm64, armhf, ...; default: this host's), another one through qemu-user.")
@click.option("--mirror", "mirrors", multiple=True, metavar="LINE", help="apt source line instead of the default ones.")
@click.option("--force", is_flag=True, help="Rebuild even if cached.")
def image_build(profile: str, release: str, arch: str | None, mirrors: tuple[str, ...], force: bool) -> None:
    from .images.build import build, recipe_for

    img = build(recipe_for(profile, release, arch, mirrors=mirrors), force=force, log=console.print)
    console.print(f"image {img.recipe_hash[:12]} at {img.root}")
    console.print(f"  {img.release}/{img.arch}, profile {img.profile}, archive sha256 {img.tar_sha256[:16]}…, "
                  f"{len(img.manifest.get('installed', {}))} packages")


@image.command("list")
def image_list() -> None:
    from .images.build import list_images

    for img in list_images():
        console.print(f"{img.recipe_hash[:12]}  {img.release}/{img.arch}  {img.profile:<6} "
                      f"{img.manifest.get('built_at', '')}  {' '.join(img.packages)}")


@image.command("prune")
@click.option("--all", "everything", is_flag=True, help="Also the current quick and full images.")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
def image_prune(everything: bool, dry_run: bool) -> None:
    """Remove cached images (and the engines' imported copies) other than the current quick
    and full ones; images mounted by an instance are kept."""
    from .images.build import list_images, mounts_using, recipe_for, remove
    from .registry import PLATFORMS

    keep = set() if everything else {recipe_for(p).hash() for p in ("quick", "full")}
    for img in list_images():
        if img.recipe_hash in keep:
            continue
        what = f"{img.short} ({img.profile}, {img.manifest.get('built_at', '?')})"
        if dry_run:
            console.print(f"would keep {what}: in use" if mounts_using(img.root) else f"would remove {what}")
            continue
        try:
            remove(img)
        except InputError as exc:
            console.print(f"kept {what}: {escape(exc.message)}")
            continue
        console.print(f"removed {what}")
        for name in PLATFORMS.names():
            for line in PLATFORMS.get(name).forget_image(img.tag):
                console.print(f"  {escape(line)}")


@cli.command()
@click.argument("campaign_file", required=False, type=click.Path(dir_okay=False))
@click.option("--quick", is_flag=True, help="The quick campaign on every platform available here.")
@click.option("--resume", "resume_id", metavar="RUN_ID", help="Complete an interrupted run.")
@click.option("--report/--no-report", "show_report", default=True, help="Print the report when done.")
@click.option("--wait", is_flag=True, help="If another run is measuring on this host, wait for it instead of refusing.")
@click.option("--probe", "probes", multiple=True, metavar="NAME",
              help="With --quick: a probe beside every execution (energy, perf, pressure; repeat for several).")
@click.option("--dynamic-inventory", is_flag=True,
              help="Let ansible-inventory run the campaign's inventory script or plugin (it runs as this user; "
                   "without this flag an inventory is read as YAML or INI data only).")
@click.option("--allow-meter", is_flag=True,
              help="Let the campaign's energy probe run its `meter:` command (as root); refused without it.")
@click.option("--dry-run", is_flag=True, help="Validate, print the plan and an estimated duration; start nothing.")
@db_option
def run(campaign_file: str | None, quick: bool, resume_id: str | None, show_report: bool, wait: bool,
        probes: tuple[str, ...], dynamic_inventory: bool, allow_meter: bool, dry_run: bool,
        db_url: str | None) -> None:
    """Run a campaign (YAML file), the quick campaign, or resume a run."""
    from .config import check_host, parse_campaign, read_campaign
    from .report.progress import Cap, RichReporter
    from .runner import execute, hostlock
    from .runner.probing import require_consent
    from .runner.quick import quick_campaign

    if sum(bool(x) for x in (campaign_file, quick, resume_id)) != 1:
        raise InputError("give exactly one of CAMPAIGN_FILE, --quick or --resume RUN_ID",
                         "e.g. `virtbench run --quick`")
    if probes and not quick:
        raise InputError("--probe goes with --quick", "in a campaign file write `probes: [...]`")
    from .registry import PROBES

    for name in probes:
        PROBES.get(name)  # an unknown name: one line, exit 2, before anything starts
    reporter = RichReporter(console)
    source = ""
    if campaign_file:  # validated, and checked against this host, before anything is created
        from .platforms.base import Paths

        campaign, source = read_campaign(campaign_file, dynamic_inventory=dynamic_inventory)
        require_consent(campaign, allow_meter)
        check_host(campaign, Paths.from_env(), source=campaign_file)
    if dry_run:
        from .commands.dryrun import dry_run as print_dry_run

        print_dry_run(campaign if campaign_file else None, quick, list(probes), resume_id, db_url)
        return
    paths = _paths()
    store = _store(db_url)
    from .store.queue import cancel_requested, mark_cancelled

    if resume_id:  # the stored campaign may have come from anyone (the web queue)
        stored = store.run(resume_id)
        require_consent(parse_campaign(stored.campaign, f"run {stored.id}"), allow_meter)
    run_id = stored.id if resume_id else execute.new_run_id()

    def stop_requested() -> bool:  # `virtbench cancel` or the web app, read between instances
        return cancel_requested(store, run_id)

    what = f"run {resume_id}" if resume_id else "the quick campaign" if quick else f"campaign {campaign.name!r}"
    with hostlock.hold(paths, f"`virtbench run` of {what}", wait=wait, log=reporter.log):
        if resume_id:
            outcome = execute.resume(store, run_id, paths, reporter=reporter, stop_requested=stop_requested)
        else:
            left_out = None
            if quick:
                plan = quick_campaign(paths, reporter.log, probes=list(probes))
                campaign, left_out = plan.campaign, plan.left_out
            reporter.cap = Cap.of(campaign)  # the ETA's bound while adaptive rounds may grow the plan
            outcome = execute.start(store, campaign, paths, source=source, reporter=reporter, left_out=left_out,
                                    run_id=run_id, stop_requested=stop_requested)
    if outcome.interrupted and cancel_requested(store, outcome.run_id):
        mark_cancelled(store, outcome.run_id)
        errconsole.print(f"run {outcome.run_id} cancelled")
        sys.exit(130)
    if outcome.interrupted:
        errconsole.print(f"[yellow]run {outcome.run_id} interrupted; complete it with "
                         f"`virtbench run --resume {outcome.run_id}`[/yellow]")
        sys.exit(130)
    if show_report:
        _print_report(store, outcome.run_id, as_json=False, detail=False)
    else:  # computed and stored now, as the web worker does, so the first `report` reads it
        from .report import summary

        summary.build(store, outcome.run_id, sections=False)
    if outcome.failed:
        errconsole.print(f"[red]{outcome.failed} executions failed[/red]; raw output: "
                         f"`virtbench show {outcome.run_id} --failed`")
        sys.exit(1)


@cli.command()
@click.argument("run_refs", nargs=-1, metavar="[RUN]...")
@click.option("--json", "as_json", is_flag=True, help="The scripting contract (see README).")
@click.option("--detail", is_flag=True, help="Every statistic of every platform and metric.")
@click.option("--wide", is_flag=True, help="The old layout: every platform in one table with intervals, "
              "wider than 100 columns.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write one self-contained HTML report (works offline) to this file.")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write every figure as PDF, SVG and PNG with its data as CSV, and the tables as "
                   "tables.md and tables.tex, into this directory.")
@click.option("--figure-width", type=click.Choice(["column", "page"]), default="page", show_default=True,
              help="Figure files for one column (3.3 in) or two columns (7 in) of a paper.")
@click.option("--interactive", is_flag=True, help="With --html: plotly.js figures (zoom, hover; 4.6 MB more) "
              "instead of inline SVG.")
@click.option("--min-effect", type=FiniteRange(0, 1), default=0.02, show_default=True,
              help="Margin of the 'same' verdict: the ratio's 95% interval within 1 +- this.")
@db_option
def report(run_refs: tuple[str, ...], as_json: bool, detail: bool, wide: bool, html_file: Path | None,
           figures_dir: Path | None, figure_width: str, interactive: bool, min_effect: float,
           db_url: str | None) -> None:
    """Statistics and relative performance of runs (RUN_ID, a unique prefix, or 'latest').

    Several runs (e.g. one per host) merge into one comparison with hosts as columns.
    With --html or --figures the files are written and the text report is skipped.
    """
    with one_shot():
        _report(run_refs, as_json, detail, wide, html_file, figures_dir, min_effect, db_url,
                figure_width=figure_width, interactive=interactive)


def _report(run_refs: tuple[str, ...], as_json: bool, detail: bool, wide: bool, html_file: Path | None,
            figures_dir: Path | None, min_effect: float, db_url: str | None, *, figure_width: str = "page",
            interactive: bool = False) -> None:
    from .report import summary, text

    store = read_store(db_url)
    refs = run_refs or ("latest",)
    if len(refs) == 1 and not (html_file or figures_dir):
        _print_report(store, refs[0], as_json=as_json, detail=detail, min_effect=min_effect, wide=wide)
        return
    reports = [summary.build(store, ref, min_effect=min_effect) for ref in refs]
    secs = [r.sections for r in reports]
    triples = [(r.run, r.rows, r.failures) for r in reports]  # what the renderers below take
    if html_file:
        from .report import html

        html.write(html_file, triples, min_effect=min_effect, sections=secs, interactive=interactive)
        errconsole.print(f"wrote {html_file}")
    if figures_dir:
        require("figures", "--figures")
        from .report.paper import write_figures

        written = write_figures(reports, figures_dir, size=figure_width)
        errconsole.print(f"wrote {len(written)} figure and table files to {figures_dir}")
    if as_json:
        doc = (summary.report_json(reports[0], min_effect=min_effect) if len(reports) == 1
               else summary.merged_json(triples, min_effect=min_effect))
        click.echo(json.dumps(doc, indent=2, default=str))
    elif len(reports) > 1 and not (html_file or figures_dir):
        text.render_merged(summary.merged_json(triples, min_effect=min_effect), console)


@cli.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--min-effect", type=FiniteRange(0, 1), default=0.02, show_default=True,
              help="Smallest relative difference called better/worse when significant.")
@db_option
def compare(run_a: str, run_b: str, as_json: bool, min_effect: float, db_url: str | None) -> None:
    """The same platforms in two runs (before/after an upgrade): B against A by the verdict rule of
    `report` (unpaired: two runs' rounds share nothing to pair on)."""
    from .analysis.compare import compare as do_compare
    from .report import summary, text

    store = read_store(db_url)
    ra, rb = store.run(run_a), store.run(run_b)
    if ra.id == rb.id:
        raise InputError(f"A and B are the same run {ra.id}: a run compared with itself tells nothing; "
                         "give the run before and the run after the change")
    _, rows_a, _ = summary.build(store, ra.id, min_effect=min_effect, sections=False)
    _, rows_b, _ = summary.build(store, rb.id, min_effect=min_effect, sections=False)
    rows = do_compare(rows_a, rows_b, min_effect=min_effect)
    doc = summary.compare_json(ra, rb, rows, min_effect=min_effect)
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        text.render_compare(ra, rb, rows, console, doc["notes"])


@cli.command("export")
@click.argument("run_ref", default="latest")
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"]), default="csv", show_default=True)
@click.option("--output", "-o", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Directory for <run>-samples, <run>-executions and <run>-summary files.")
@db_option
def export_cmd(run_ref: str, fmt: str, out_dir: Path, db_url: str | None) -> None:
    """Raw samples, executions and summaries as files pandas reads as they are."""
    from .report.export import export

    for path in export(read_store(db_url), run_ref, out_dir, fmt):
        console.print(str(path), markup=False)


def _print_report(store: Any, run_ref: str, *, as_json: bool, detail: bool, min_effect: float = 0.02,
                  wide: bool = False) -> None:
    from .report import summary, text

    report = summary.build(store, run_ref, min_effect=min_effect)
    if as_json:
        click.echo(json.dumps(summary.report_json(report, min_effect=min_effect), indent=2, default=str))
    elif summary.run_hosts(report.run):  # one host at a time, then the hosts side by side
        for host, rows, failures in summary.per_host(report):
            console.rule(f"host {host}")
            text.render(report.run, rows, failures, console, detail=detail, wide=wide)
        from .report.sections import render_text

        render_text(list(report.sections), console)
    else:
        text.render(report.run, report.rows, report.failures, console, detail=detail, wide=wide,
                    sections=report.sections)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 exposes the app to the network.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
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
    from .web.server import serve as run_server

    run_server(db_url=db_url, host=host, port=port, token=token, private=private, worker=worker,
               secure_cookies=secure_cookies, allow_paths=allow_paths, allow_meter=allow_meter)


@cli.command()
@click.option("--once", is_flag=True, help="Exit when the queue is empty instead of waiting for more.")
@click.option("--poll", default=2.0, show_default=True, type=FiniteRange(0.1, 3600), help="Seconds between queue checks.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Probe which platforms run here at start (shown in the schedule form).")
@click.option("--allow-meter", is_flag=True,
              help="Let queued campaigns' energy probes run their `meter:` command (as root); refused without it.")
@db_option
def worker(once: bool, poll: float, probe: bool, allow_meter: bool, db_url: str | None) -> None:
    """Execute queued runs one at a time on this host; resume runs a stopped worker left."""
    from .runner.worker import main as worker_main
    from .web.cache import precompute

    worker_main(db_url, once=once, poll_s=poll, probe=probe, after_run=precompute, allow_meter=allow_meter)


from .commands.agent import agent  # noqa: E402 - commands register after the group exists
from .commands.cleanup import cleanup  # noqa: E402
from .commands.lists import list_group  # noqa: E402
from .commands.runs import cancel, delete, runs_cmd  # noqa: E402
from .commands.selftest import selftest  # noqa: E402
from .commands.show import show  # noqa: E402
from .commands.study import study  # noqa: E402

cli.add_command(cleanup)
cli.add_command(runs_cmd)
cli.add_command(cancel)
cli.add_command(delete)
cli.add_command(agent)
cli.add_command(selftest)
cli.add_command(study)
cli.add_command(show)
cli.add_command(list_group)


def _sigterm_to_interrupt(signum, frame) -> None:  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    # SIGTERM (kill, a service manager) stops virtbench like Ctrl-C: instances are removed and
    # the run is marked interrupted instead of leaving containers and mounts behind.
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        errconsole.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:  # a bad option or argument: one line and its fix, like any bad input
        from .config.messages import one_line

        ctx = getattr(exc, "ctx", None)
        click.echo(f"error: {one_line(' '.join(exc.format_message().split(' ')))} "
                   f"(fix: see `{ctx.command_path if ctx else 'virtbench'} --help`)", err=True)
        sys.exit(2)
    except VirtbenchError as exc:
        # One plain, unwrapped line with the cause and the fix: scripts and tests read it,
        # terminals wrap it anyway. Bad input (exit 2) stays one line whatever it quotes: a
        # newline in a name is shown escaped.
        from .config.messages import one_line

        tidy = one_line if exc.exit_code == 2 else str
        click.echo(f"error: {tidy(exc.message)}" + (f" (fix: {tidy(exc.fix)})" if exc.fix else ""), err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        errconsole.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        full = disk_full(exc)
        if full is None:
            raise
        click.echo(f"error: {full.message} (fix: {full.fix})", err=True)  # one line, not a traceback
        sys.exit(full.exit_code)
