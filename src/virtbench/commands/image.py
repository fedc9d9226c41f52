"""`virtbench image build`, `list` and `prune`: the guest images every platform runs."""
from __future__ import annotations

import click
from rich.markup import escape

from ..errors import InputError
from ..notation import when
from .shared import console


@click.group()
def image() -> None:
    """Build and list guest images (one Debian rootfs every platform runs)."""


@image.command("build")
@click.option("--profile", type=click.Choice(["quick", "full"]), default="quick", show_default=True,
              help="quick: the quick comparison's tools; full: every benchmark's (Blender and PyTorch: 2 GB).")
@click.option("--release", default="bookworm", show_default=True, help="Debian release.")
@click.option("--arch", default=None, metavar="ARCH",
              help="Debian architecture (arm64, armhf, ...; default: this host's), another one through qemu-user.")
@click.option("--mirror", "mirrors", multiple=True, metavar="LINE", help="apt source line instead of the default ones.")
@click.option("--force", is_flag=True, help="Rebuild even if cached.")
def image_build(profile: str, release: str, arch: str | None, mirrors: tuple[str, ...], force: bool) -> None:
    """Build the guest image (a Debian root filesystem with every tool), cached under its recipe's hash."""
    from ..images.build import build, recipe_for

    img = build(recipe_for(profile, release, arch, mirrors=mirrors), force=force, log=console.print)
    console.print(f"image {img.recipe_hash[:12]} at {img.root}")
    console.print(f"  {img.release}/{img.arch}, profile {img.profile}, archive sha256 {img.tar_sha256[:16]}…, "
                  f"{len(img.manifest.get('installed', {}))} packages")


@image.command("list")
def image_list() -> None:
    """The cached guest images: recipe hash, release/architecture, profile, build time, packages."""
    from ..images.build import list_images

    for img in list_images():
        console.print(f"{img.recipe_hash[:12]}  {img.release}/{img.arch}  {img.profile:<6} "
                      f"{when(img.manifest.get('built_at'))}  {' '.join(img.packages)}", markup=False)


@image.command("prune")
@click.option("--all", "everything", is_flag=True, help="Also the current quick and full images.")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
def image_prune(everything: bool, dry_run: bool) -> None:
    """Remove cached images (and the engines' imported copies) other than the current quick
    and full ones; images mounted by an instance are kept."""
    from ..images.build import list_images, mounts_using, recipe_for, remove
    from ..registry import PLATFORMS

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
