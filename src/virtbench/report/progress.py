"""Progress display for the terminal. Refreshes once a second so the display itself does not
compete for CPU with what is being measured."""
from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

LOG_WIDTH = 100
"""Nothing virtbench prints is wider than this (issue #17), a run's messages included."""


class RichReporter:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task = TaskID(0)

    def begin(self, total: int, done: int) -> None:
        if self.progress is not None:  # adaptive repetition grew the plan
            self.progress.update(self.task, total=total)
            return
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, refresh_per_second=1,
                                 transient=False)
        self.progress.start()
        self.task = self.progress.add_task("starting", total=total, completed=done)

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
