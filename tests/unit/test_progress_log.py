"""Log lines during a run are shown as written, above the progress bar (#10 item 7)."""
from __future__ import annotations

import io

from rich.console import Console

from virtbench.report.progress import RichReporter


def test_log_lines_are_plain_text_not_markup():
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, width=200, force_terminal=False))
    reporter.log("round 1 docker: fio[bs=4k] failed: [/usr/bin/fio] exit 1 [red]")
    assert "fio[bs=4k] failed: [/usr/bin/fio] exit 1 [red]" in out.getvalue()


def test_log_lines_during_progress_do_not_break_the_bar():
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, width=80, force_terminal=True))
    reporter.begin(3, 0)
    reporter.step("round 1 native: sysbench-cpu")
    reporter.log("a long line " * 20)
    reporter.advance()
    reporter.end()
    text = out.getvalue()
    assert "a long line" in text and "1/3" in text


def test_run_messages_wrap_at_100_columns():
    """The quick run's 'skipping kvm' line was 429 characters wide, its extra rounds' 110-150."""
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, width=200, force_terminal=False))
    message = "skipping kvm (qemu): no VM: " + "KVM does not work here " * 20 + "fio[bs=4k]"
    reporter.log(message)
    lines = out.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines)
    assert " ".join(lines).split() == message.split()


def test_a_resumed_run_counts_from_what_it_had_done():
    """measure's placeholder begin(0, 0) came first, and the kind's begin(12, 8) then kept 0 done;
    an adaptive round's begin said 0 done, which the web worker showed as such."""
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, width=80, force_terminal=True))
    reporter.begin(0, 0)  # measure, before the kind plans
    reporter.begin(12, 8)  # the rounds of a resumed run: 8 of 12 done
    reporter.advance()
    reporter.begin(18, 9)  # an adaptive round grew the plan, said whole
    reporter.end()
    assert "9/18" in out.getvalue()


def test_a_kind_without_a_count_shows_no_fraction():
    """Density plans no number of executions: '0/0' said nothing."""
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, width=80, force_terminal=True))
    reporter.begin(0, 0)
    reporter.step("density: 40 instances")
    reporter.end()
    assert "density: 40 instances" in out.getvalue() and "0/0" not in out.getvalue()
