"""Progress display for the terminal. Refreshes once a second so the display itself does not
compete for CPU with what is being measured.

With adaptive rounds the plan grows while the run measures, so the bar says what it counts:
executions done / planned so far, and the cap the adaptive rule may grow the plan to. The
ETA is the time the planned executions still need at the rate this process measured them
(from the start of this process, not a short window: executions of one round differ tenfold),
and with a cap also the most the run may take (its caps: rounds and minutes)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

if TYPE_CHECKING:
    from ..experiments.planning import Plan

LOG_WIDTH = 100
"""Nothing virtbench prints is wider than this (issue #17), a run's messages included."""


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Cap:
    """The adaptive rule's bounds: executions at its round cap, and a time after which no extra
    round starts (time.monotonic())."""

    def __init__(self, executions: int, per_round: int, deadline: float | None) -> None:
        self.executions, self.per_round, self.deadline = executions, per_round, deadline

    @classmethod
    def of(cls, plan: Plan, started: float | None = None) -> Cap | None:
        """The cap of a run's plan (experiments/planning.py), None without an adaptive rule."""
        if plan.rounds.cap is None or plan.rounds.max_minutes is None:
            return None
        start = started if started is not None else time.monotonic()
        return cls(plan.at_cap(), plan.per_round(), start + plan.rounds.max_minutes * 60)


def remaining(done: int, total: int, start_done: int, elapsed: float, cap: Cap | None = None,
              now: float | None = None) -> tuple[float, float | None] | None:
    """(seconds the planned executions still need at the rate measured so far, and with a cap
    that may grow the plan the most the run may still take, else None); None before anything
    was measured. `now` is on the clock of cap.deadline (time.monotonic() by default)."""
    measured = done - start_done
    if measured <= 0 or elapsed <= 0:
        return None
    rate = measured / elapsed
    planned = max(0, total - done) / rate
    if cap is None or cap.executions <= total:
        return planned, None
    most = (cap.executions - done) / rate
    if cap.deadline is not None:  # no extra round after the deadline; the one under way finishes
        left = cap.deadline - (time.monotonic() if now is None else now)
        most = min(most, max(0.0, left) + cap.per_round / rate)
    return planned, max(most, planned)


def eta_words(left: tuple[float, float | None] | None) -> str:
    """'ETA 1:40' or 'ETA 1:40, at most 2:40' (remaining()), 'ETA -' before anything was measured."""
    if left is None:
        return "ETA -"
    planned, most = left
    return f"ETA {clock(planned)}" + (f", at most {clock(most)}" if most is not None else "")


def eta_text(done: int, total: int, start_done: int, elapsed: float, cap: Cap | None = None,
             now: float | None = None) -> str:
    """'done/planned so far' (+ the cap), then the ETA of the planned executions at this
    process's rate so far, and with a cap the most the run may still take."""
    grows = cap is not None and cap.executions > total
    text = f"{done}/{total}" + (f" (cap {cap.executions})" if cap is not None and grows else "")
    return f"{text} {eta_words(remaining(done, total, start_done, elapsed, cap, now))}"


class EtaColumn(ProgressColumn):
    def __init__(self, reporter: RichReporter) -> None:
        super().__init__()
        self.reporter = reporter

    def render(self, task: Task) -> Text:
        if task.total is None:  # a kind that plans no count of executions (density): no "0/0", no ETA
            return Text("")
        return Text(eta_text(int(task.completed), int(task.total or 0), int(task.fields.get("start_done", 0)),
                             task.elapsed or 0.0, self.reporter.cap), style="progress.remaining")


class RichReporter:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task = TaskID(0)
        self.cap: Cap | None = None
        """Set by the caller once the campaign is known (Cap.of): the ETA's upper bound."""

    def begin(self, total: int, done: int) -> None:
        if self.progress is not None:  # the kind's plan after measure's placeholder, or an adaptive round grew it
            if self._task().total is None:  # the ETA's rate counts from the plan's first done
                self.progress.update(self.task, start_done=done)
            self.progress.update(self.task, total=total or None, completed=done)
            return
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), EtaColumn(self),
                                 TimeElapsedColumn(), console=self.console, refresh_per_second=1,
                                 transient=False)
        self.progress.start()
        # total 0 (measure's begin before the kind plans): unknown, a pulsing bar until it says
        self.task = self.progress.add_task("starting", total=total or None, completed=done, start_done=done)

    def _task(self) -> Task:
        assert self.progress is not None
        return next(t for t in self.progress.tasks if t.id == self.task)

    def step(self, description: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=description)

    def advance(self, n: int = 1) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def log(self, message: str) -> None:
        """Above the progress bar, as plain text: messages carry benchmark keys such as
        fio[bs=4k] and tool output, which rich would otherwise read as markup (and drop).
        Wrapped at 100 columns at most, like every table of the report."""
        self.console.print(message, markup=False, highlight=False, width=min(self.console.width, LOG_WIDTH))

    def end(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
