"""gan: training time of a small DCGAN with PyTorch on images it generates (LSBS application 19).

LSBS trained a generative adversarial network on 322 images and timed it (seeds/003). Its
images and network are not published, so this module fixes both: `images` grey-scale
pictures of `size` x `size` pixels, each a few soft-edged discs and bars at seeded random
positions (drawn with tensor operations, no image files or downloads), and a DCGAN
(Radford et al. 2015): a generator of transposed convolutions with batch norm from a
64-dimensional noise vector, a discriminator of strided convolutions with leaky ReLU, Adam
(lr 2e-4, betas 0.5/0.999), binary cross-entropy, `epochs` passes over the images in
mini-batches of `batch`.

Timing: `time.perf_counter()` around the training loop only. Python and torch start-up (1-3 s,
far more in an emulated VM), image generation and network construction are outside it. Each
epoch's mean losses are printed; the parser refuses a non-finite loss (a diverged or
broken run) and a missing epoch. `torch.manual_seed(0)` makes the work identical on every
platform. `threads: 0` means one intra-op thread per CPU the process may run on
(`sched_getaffinity`), set explicitly: torch's own default comes from its cpuinfo library,
which in Debian's build fell back to 1 thread on the 2-core development machine.

The script is one constant `python3 -c` string; the values arrive as argv.
"""
from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from pydantic import Field, field_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

SCRIPT = r"""
import os, sys, time
import torch
from torch import nn

images, size, epochs, batch, threads = map(int, sys.argv[1:6])
torch.set_num_threads(threads or len(os.sched_getaffinity(0)))
torch.manual_seed(0)

def pictures(n, s):
    yy, xx = torch.meshgrid(torch.linspace(0, 1, s), torch.linspace(0, 1, s), indexing="ij")
    out = torch.full((n, 1, s, s), -1.0)
    for i in range(n):
        img = torch.zeros(s, s)
        for _ in range(3):
            cx, cy, r = torch.rand(3) * torch.tensor([0.8, 0.8, 0.2]) + torch.tensor([0.1, 0.1, 0.08])
            d = ((xx - cx) ** 2 + (yy - cy) ** 2).sqrt()
            img = torch.maximum(img, torch.sigmoid((r - d) * s))
        y0 = float(torch.rand(1)) * 0.8 + 0.1
        img = torch.maximum(img, 0.7 * torch.sigmoid((0.04 - (yy - y0).abs()) * s))
        out[i, 0] = img * 2 - 1
    return out

data = pictures(images, size)
z_dim, width, layers = 64, 32, size.bit_length() - 3  # 32 px: 3 up-samplings after 4x4

g_layers = [nn.ConvTranspose2d(z_dim, width * 2 ** (layers - 1), 4, 1, 0, bias=False),
            nn.BatchNorm2d(width * 2 ** (layers - 1)), nn.ReLU(True)]
for k in range(layers - 1, 0, -1):
    g_layers += [nn.ConvTranspose2d(width * 2 ** k, width * 2 ** (k - 1), 4, 2, 1, bias=False),
                 nn.BatchNorm2d(width * 2 ** (k - 1)), nn.ReLU(True)]
g_layers += [nn.ConvTranspose2d(width, 1, 4, 2, 1, bias=False), nn.Tanh()]
d_layers = [nn.Conv2d(1, width, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True)]
for k in range(1, layers):
    d_layers += [nn.Conv2d(width * 2 ** (k - 1), width * 2 ** k, 4, 2, 1, bias=False),
                 nn.BatchNorm2d(width * 2 ** k), nn.LeakyReLU(0.2, True)]
d_layers += [nn.Conv2d(width * 2 ** (layers - 1), 1, 4, 1, 0, bias=False), nn.Flatten()]
G, D = nn.Sequential(*g_layers), nn.Sequential(*d_layers)
assert G(torch.zeros(2, z_dim, 1, 1)).shape == (2, 1, size, size)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
print(f"vb:gan torch={torch.__version__} threads={torch.get_num_threads()} images={images} "
      f"size={size} batch={batch} epochs={epochs}", flush=True)

start = time.perf_counter()
for epoch in range(1, epochs + 1):
    t0, sum_d, sum_g, steps = time.perf_counter(), 0.0, 0.0, 0
    for real in data[torch.randperm(images)].split(batch):
        n = real.shape[0]
        fake = G(torch.randn(n, z_dim, 1, 1))
        opt_d.zero_grad()
        loss_d = bce(D(real), torch.ones(n, 1)) + bce(D(fake.detach()), torch.zeros(n, 1))
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = bce(D(fake), torch.ones(n, 1))
        loss_g.backward()
        opt_g.step()
        sum_d, sum_g, steps = sum_d + loss_d.item(), sum_g + loss_g.item(), steps + 1
    print(f"vb:epoch {epoch} steps={steps} loss_d={sum_d / steps:.6f} loss_g={sum_g / steps:.6f} "
          f"seconds={time.perf_counter() - t0:.6f}", flush=True)
print(f"vb:train_s {time.perf_counter() - start:.6f}")
print("vb:done")
"""

_HEAD = r"^vb:gan torch=(\S+) threads=(\d+) images=(\d+) size=(\d+) batch=(\d+) epochs=(\d+)$"
_EPOCH = r"^vb:epoch (\d+) steps=(\d+) loss_d=(\S+) loss_g=(\S+) seconds=(\S+)$"
_TRAIN = r"^vb:train_s ([0-9]+\.[0-9]+)$"
_DONE = r"^vb:done$"


class GanParams(Params):
    images: int = Field(322, ge=1, le=1_000_000, description="generated training images (LSBS: 322)")
    size: int = Field(32, description="image side in pixels: 32, 64 or 128")
    epochs: int = Field(2, ge=1, le=100_000, description="passes over the training images")
    batch: int = Field(32, ge=1, le=65536, description="mini-batch size")
    threads: int = Field(0, ge=0, le=1024, description="torch intra-op threads; 0: one per CPU the instance may run on")

    @field_validator("size")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v not in (32, 64, 128):
            raise ValueError("size must be 32, 64 or 128 (the DCGAN doubles 4x4 up to it)")
        return v


class Gan(Benchmark):
    """DCGAN training time with PyTorch (CPU) on generated images, timed inside Python."""

    name: ClassVar[str] = "gan"
    tool: ClassVar[str] = "pytorch"
    packages: ClassVar[tuple[str, ...]] = ("python3-torch",)
    Params: ClassVar[type[Params]] = GanParams
    description: ClassVar[str] = "PyTorch DCGAN: training time on generated images"
    study: ClassVar[dict[str, Any]] = {"size": 64, "epochs": 20}
    """The `full` profile: LSBS trained on 322 images; 64 px and 20 epochs give tens of
    seconds to minutes on a few cores."""

    params: GanParams

    def metrics(self) -> list[Metric]:
        p = self.params
        return [Metric("train_s", "s", False, "application",
                       f"DCGAN training, {p.epochs} epoch(s) over {p.images} {p.size}x{p.size} images, "
                       f"batch {p.batch}, wall time inside Python")]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        return ["python3", "-c", SCRIPT, str(p.images), str(p.size), str(p.epochs), str(p.batch), str(p.threads)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        p = self.params
        search(_DONE, stdout, self.tool, source, re.M)
        head = search(_HEAD, stdout, self.tool, source, re.M)
        want = (p.images, p.size, p.batch, p.epochs)
        if tuple(int(head.group(i)) for i in (3, 4, 5, 6)) != want:
            raise ParseError(self.tool, f"images/size/batch/epochs {want} (got {head.group(0)!r})", source)
        epochs = re.findall(_EPOCH, stdout, re.M)
        if [int(e[0]) for e in epochs] != list(range(1, p.epochs + 1)):
            raise ParseError(self.tool, f"one vb:epoch line for each of epochs 1..{p.epochs}", source)
        for e in epochs:
            if not all(math.isfinite(float(v)) for v in e[2:4]):
                raise ParseError(self.tool, f"finite losses (got epoch {e[0]}: loss_d={e[2]} loss_g={e[3]})", source)
        seconds = float(search(_TRAIN, stdout, self.tool, source, re.M).group(1))
        if seconds <= 0:
            raise ParseError(self.tool, f"a positive training time (got {seconds})", source)
        return {"train_s": seconds}

    def version_command(self) -> list[str]:
        return ["python3", "-c", "import torch; print('torch', torch.__version__)"]

    def execution_timeout(self) -> float:
        p = self.params
        # ~1 ms per 32x32 image and epoch on one x86 core, x4 per doubling of the side;
        # emulated VMs are ~20x slower
        per_image = 1e-3 * (p.size / 32) ** 2
        return 300.0 + 40 * per_image * p.images * p.epochs
