"""Build what the integration tests need, in the background, before they need it (make test).

    .venv/bin/python tests/hostsupport/prebuild.py

tools/run-tests starts this beside lint and the unit tests (BACKGROUND_BUILDS). Everything is
content-addressed by its recipe and built under the builders' own locks (images/build.py,
images/vmdisk.py, reference_host.reference_disk), so a test that gets there first builds it
itself and this waits for it, and what this built a test finds ready: built once per run, by
whoever needs it first. Nothing here is a test's check; the tests check what they use.

At once: the reference guest's image and disk (its tests start first), the arm64 board
(emulated, into the run's own cache, so it is built from scratch every run: test_arm_fresh.py),
the image most modules use, and then one after the other the images a fresh machine's last run
built (RECORDED: in particular those of the measuring tests, which run alone at the end, where a
build would keep the other core idle). A recipe the tests no longer use costs a build here and
nothing else; `--record` writes the list of a run (tools/run-tests does, into the run's directory).

    .venv/bin/python tests/hostsupport/prebuild.py --record SINCE FILE   # images built since SINCE (epoch s)
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

if __name__ == "__main__":  # run as a script: tests/ is where hostsupport lives
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from virtbench.images import vmdisk  # noqa: E402
from virtbench.images.arch import emulation  # noqa: E402
from virtbench.images.build import Recipe, build, cached, host_arch, list_images  # noqa: E402

TEST_PACKAGES = ("ca-certificates", "procps", "iproute2", "openssl", "fio", "sysbench", "sqlite3")
"""The core tools of the `image` fixture, listed here (not through the registry) so platform
tests do not depend on the benchmark plugins; the same cached image `virtbench image build`
makes for these."""

BOARD_CACHE = "arm-board"
"""The run's own image cache of test_arm_fresh.py's arm64 board (hostsupport.background.run_cache)."""


def core_image_recipe() -> Recipe:
    return Recipe(release="bookworm", arch=host_arch(), profile="quick", packages=TEST_PACKAGES)


def reference_guest() -> str:
    from hostsupport.reference_host import reference_disk

    disk, root = reference_disk()
    return f"reference disk {root}"


def arm_board() -> str:
    from hostsupport.background import run_cache
    from hostsupport.qemu_host import GUEST_HEADROOM, board_recipe

    cache = run_cache(BOARD_CACHE)
    if cache is None:
        return "skipped: not in a make test run (test_arm_fresh.py builds its board into a cache of its own)"
    emu = emulation("arm64")
    if not emu.ok:
        return f"skipped: cannot cross-build arm64 here: {emu.reason}"
    image = build(board_recipe("arm64"), cache)
    disk = vmdisk.build_disk(image, headroom=GUEST_HEADROOM)
    return f"arm64 board image {image.root}, disk {disk.root.name}"


def core_image() -> str:
    return f"core image {build(core_image_recipe()).root}"


RECORDED = Path(__file__).with_name("images.json")
"""The native images a fresh machine's `make test` built (--record), put in the order they are
needed: the reference guest's campaigns, the measuring tests', then the others."""


def recorded_images(backwards: bool = False) -> str:
    """RECORDED's images, first to last (or last to first: two such steps meet in the middle;
    an image the other is building is waited for, then found built)."""
    recipes = [Recipe(**{**r, "packages": tuple(r["packages"]), "mirrors": tuple(r["mirrors"]),
                         "initrd_modules": tuple(r.get("initrd_modules", ()))})
               for r in json.loads(RECORDED.read_text())] if RECORDED.is_file() else []
    done = []
    for recipe in reversed(recipes) if backwards else recipes:
        if recipe.arch == host_arch() and cached(recipe) is None:  # emulated ones: the tests' own (test_arm_fresh)
            t0 = time.monotonic()
            build(recipe)
            done.append(f"{recipe.profile} {recipe.hash()[:12]} {time.monotonic() - t0:.0f} s")
    return f"{len(done)} of {len(recipes)} recorded images ({', '.join(done)})"


def record(since: float, out: Path) -> None:
    """The recipes of the native images built into the shared cache since `since`, oldest first."""
    from hostsupport.reference_host import reference_recipe

    found = []
    for image in list_images():
        m = image.manifest
        if "variant" not in m or m.get("arch") != host_arch() or image.root.name != image.recipe_hash[:16]:
            continue  # not an mmdebstrap recipe (a busybox or brought image), or another architecture
        if image.recipe_hash == reference_recipe().hash():
            continue  # built by its own step
        built = datetime.strptime(m["built_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        if built >= since - 1:
            mirrors = m.get("mirrors")
            recipe = {"release": m["release"], "arch": m["arch"], "profile": m["profile"],
                      "packages": list(m["packages"]), "variant": m["variant"],
                      "mirrors": mirrors if isinstance(mirrors, list) else []}
            if m.get("initrd_modules"):  # only then: the recorded list stays as it was
                recipe["initrd_modules"] = list(m["initrd_modules"])
            found.append((built, recipe))
    recipes = [r for _, r in sorted(found, key=lambda f: f[0])]
    out.write_text(json.dumps(recipes, indent=1) + "\n")
    known = json.loads(RECORDED.read_text()) if RECORDED.is_file() else []
    new = [r for r in recipes if r not in known]
    if new:
        print(f"{len(new)} image(s) this run built are not in {RECORDED.name} (prebuilt from the start of make test): "
              f"on a fresh machine's run, add them from {out} where they are needed first: "
              + "; ".join(f"{r['profile']} {' '.join(r['packages'])[:60]}" for r in new))


STEPS: tuple[tuple[str, Callable[[], str]], ...] = (
    ("reference guest", reference_guest), ("arm64 board", arm_board), ("core image", core_image),
    ("recorded images", recorded_images), ("recorded images backwards", lambda: recorded_images(backwards=True)))


def main() -> int:
    """Every step at once (each is mostly one process: an emulated dpkg, a download, mkfs), each
    printing its outcome as it ends; exit 1 when one failed."""
    import signal
    from concurrent.futures import ThreadPoolExecutor

    # make test stops a build no test needs: each builder's cleanup (its chroot's mounts) runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def one(name: str, step: Callable[[], str]) -> bool:
        t0 = time.monotonic()
        try:
            print(f"prebuild: {name}: {step()} ({time.monotonic() - t0:.0f} s)", flush=True)
            return True
        except Exception as exc:  # noqa: BLE001 - the test that needs it builds it again and fails with the reason
            print(f"prebuild: {name} FAILED after {time.monotonic() - t0:.0f} s: {type(exc).__name__}: {exc}",
                  flush=True)
            return False

    with ThreadPoolExecutor(len(STEPS)) as pool:
        ok = list(pool.map(lambda s: one(*s), STEPS))
    return 0 if all(ok) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--record"]:
        record(float(sys.argv[2]), Path(sys.argv[3]))
        raise SystemExit(0)
    raise SystemExit(main())
