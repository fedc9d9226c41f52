"""A platform: the bare-metal chroot under another name, each command wrapped in a shell that
says so on stderr first (what a wrapper runtime's argv looks like); it never starts a process itself."""
from __future__ import annotations

from typing import ClassVar

from virtbench.platforms.base import Instance
from virtbench.platforms.native import Native


class Toy(Native):
    type: ClassVar[str] = "toy"
    description: ClassVar[str] = "bare metal through env (a plugin test's platform)"

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        return super().exec_argv(instance, ["sh", "-c", 'echo "toy platform" >&2; exec "$@"', "sh", *argv])
