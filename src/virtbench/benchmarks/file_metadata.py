"""file-metadata: file creations and stat() calls per second in the scratch directory (fio).

fio's `filecreate` engine opens `files` new files (O_CREAT) and closes them, timing each
creation; its `filestat` engine lays out `files` files first (untimed) and then stat()s each
of them `loops` times. Each job's IOPS is its operations per second. Both jobs run one after
the other (stonewall) and unlink their files at the end. These are path lookups and inode
operations, no data: the cost of the file system interface, which gVisor serves through its
gofer, a container through overlayfs, a VM through its own kernel on a virtual disk.
"""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params
from .fio import fio_json

_JOBS = (("create", "filecreate"), ("stat", "filestat"))


class FileMetadataParams(Params):
    files: int = Field(2000, ge=10, le=1_000_000, description="files created, and files stat()ed")
    loops: int = Field(50, ge=1, le=10_000,
                       description="stat() passes over the files (fio times jobs in ms: keep a job above 100 ms)")


class FileMetadata(Benchmark):
    """Creations and stat() calls per second, higher is better."""

    name: ClassVar[str] = "file-metadata"
    tool: ClassVar[str] = "fio"
    packages: ClassVar[tuple[str, ...]] = ("fio",)
    Params: ClassVar[type[Params]] = FileMetadataParams
    description: ClassVar[str] = "fio filecreate + filestat: creations and stat() per second"
    study: ClassVar[dict[str, Any]] = {"files": 20000, "loops": 100}

    params: FileMetadataParams

    def metrics(self) -> list[Metric]:
        p = self.params
        return [Metric("create_per_s", "1/s", True, "kernel", f"open(O_CREAT)+close of {p.files} new files"),
                Metric("stat_per_s", "1/s", True, "kernel", f"stat() of {p.files} files x {p.loops} passes")]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        return ["fio", "--output-format=json", "--eta=never", f"--directory={workdir}", "--unlink=1",
                "--filesize=4k", f"--nrfiles={p.files}",
                "--name=create", "--ioengine=filecreate", "--openfiles=1", "--stonewall",
                "--name=stat", "--ioengine=filestat", f"--loops={p.loops}", "--stonewall"]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        doc = fio_json(stdout, source)
        try:
            jobs = {j["jobname"]: j for j in doc["jobs"]}
        except (KeyError, TypeError) as exc:
            raise ParseError(self.tool, f"a JSON document with jobs[] ({exc})", source) from None
        expected = {"create": self.params.files, "stat": self.params.files * self.params.loops}
        out = {}
        for job, _ in _JOBS:
            data = jobs.get(job)
            if data is None:
                raise ParseError(self.tool, f"a job named {job!r} in jobs[]", source)
            if data.get("error", 1) != 0:
                raise ParseError(self.tool, f"jobs[{job}].error == 0 (got {data.get('error')})", source)
            done = data["read"].get("total_ios")
            if done != expected[job]:
                raise ParseError(self.tool, f"jobs[{job}].read.total_ios == {expected[job]} (got {done})", source)
            iops = float(data["read"].get("iops") or 0)
            if iops <= 0:
                raise ParseError(self.tool, f"jobs[{job}].read.iops > 0", source)
            out[f"{job}_per_s"] = iops
        return out

    def version_command(self) -> list[str]:
        return ["fio", "--version"]

    def execution_timeout(self) -> float:
        p = self.params
        return p.files * (2 + p.loops) * 1e-3 + 60.0  # 1 ms per operation: gVisor gofer under load
