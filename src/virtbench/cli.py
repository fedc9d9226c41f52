"""Command line: the click group and its commands' registration; each command lives in its
own module under commands/ (which builds library objects and prints; no measurement logic
lives there either), and main() turns errors into one line and an exit code."""
from __future__ import annotations

import signal
import sys

import click

from . import __version__
from .commands.agent import agent
from .commands.cleanup import cleanup
from .commands.compare import compare
from .commands.doctor import doctor
from .commands.export import export_cmd
from .commands.image import image
from .commands.lists import list_group
from .commands.report import report
from .commands.run import run
from .commands.runs import cancel, delete, runs_cmd
from .commands.selftest import selftest
from .commands.serve import serve
from .commands.shared import errconsole, width_of
from .commands.show import show
from .commands.study import study
from .commands.worker import worker
from .errors import VirtbenchError, disk_full


@click.group(context_settings={"help_option_names": ["-h", "--help"], "terminal_width": width_of(sys.stdout),
                                "max_content_width": width_of(sys.stdout)})
@click.version_option(__version__, prog_name="virtbench")
def cli() -> None:
    """What does virtualization cost me, here, for my workloads?"""


cli.add_command(doctor)
cli.add_command(image)
cli.add_command(run)
cli.add_command(report)
cli.add_command(compare)
cli.add_command(export_cmd)
cli.add_command(serve)
cli.add_command(worker)
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


def say_error(line: str) -> None:
    """An error: one line on a pipe or in a file (scripts, logs and tests read it whole), wrapped
    at word boundaries to the terminal's width on a tty, its continuation indented."""
    if sys.stderr.isatty() and "\n" not in line:
        import textwrap

        width = width_of(sys.stderr)
        line = "\n".join(textwrap.wrap(line, width - 1, subsequent_indent="  ", break_long_words=False,
                                        break_on_hyphens=False)) or line
    click.echo(line, err=True)


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
        say_error(f"error: {one_line(' '.join(exc.format_message().split(' ')))} "
                  f"(fix: see `{ctx.command_path if ctx else 'virtbench'} --help`)")
        sys.exit(2)
    except VirtbenchError as exc:
        # One plain line with the cause and the fix: scripts and tests read it. Bad input (exit 2)
        # stays one line whatever it quotes: a newline in a name is shown escaped.
        from .config.messages import one_line

        tidy = one_line if exc.exit_code == 2 else str
        say_error(f"error: {tidy(exc.message)}" + (f" (fix: {tidy(exc.fix)})" if exc.fix else ""))
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
