"""blender: render time of a Cycles scene the benchmark generates (LSBS application 17, seeds/003).

LSBS rendered Blender's "Classroom" demo scene with Blender 3.3. That file is not in Debian
and the machines have no internet, so the scene is built by a fixed Python script inside
Blender: a ground plane, a grid of `objects` smooth spheres with four principled materials
(diffuse, metal, glass, emissive-tinted), a sun and an area light, a world colour and a camera.
Glass and metal make the path tracer bounce, so the render exercises what Classroom does
(BVH build, shading, many bounces) at a size chosen by `width`, `height` and `samples`.

Timing: `time.perf_counter()` around `bpy.ops.render.render(write_still=True)` inside Blender,
so Blender's start-up (about 1 s, more in an emulated VM) and the scene building are not
measured; the render includes scene synchronisation and BVH build, as a user's render does.
The seed is fixed (Cycles `seed = 0`) and denoising is off, so every platform renders the
same image; its mean pixel value is printed and the parser refuses a black or missing image.

The script is one constant `--python-expr` string; the values arrive after `--` as argv
and are never pasted into code. `--python-exit-code 1` makes a Python error exit non-zero
(Blender otherwise exits 0 after a failing script).
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

SCRIPT = r"""
import math, sys, time
import bpy
from mathutils import Vector

out, width, height, samples, objects, threads = sys.argv[sys.argv.index("--") + 1:]
width, height, samples, objects, threads = map(int, (width, height, samples, objects, threads))
bpy.ops.wm.read_factory_settings(use_empty=True)
scene = bpy.context.scene
scene.render.engine = "CYCLES"
scene.cycles.device = "CPU"
scene.cycles.samples = samples
scene.cycles.use_adaptive_sampling = False
scene.cycles.use_denoising = False
scene.cycles.seed = 0
scene.render.resolution_x, scene.render.resolution_y = width, height
scene.render.resolution_percentage = 100
scene.render.threads_mode = "FIXED" if threads else "AUTO"
if threads:
    scene.render.threads = threads
scene.render.image_settings.file_format = "PNG"
scene.render.filepath = out

world = bpy.data.worlds.new("vb-world")
world.use_nodes = True
world.node_tree.nodes["Background"].inputs[0].default_value = (0.35, 0.45, 0.6, 1.0)
world.node_tree.nodes["Background"].inputs[1].default_value = 0.6
scene.world = world

def material(name, color, metallic=0.0, roughness=0.5, transmission=0.0):
    m = bpy.data.materials.new(name)
    m.use_nodes = True
    p = m.node_tree.nodes["Principled BSDF"]
    p.inputs["Base Color"].default_value = color
    p.inputs["Metallic"].default_value = metallic
    p.inputs["Roughness"].default_value = roughness
    p.inputs["Transmission"].default_value = transmission
    return m

mats = [material("diffuse", (0.8, 0.3, 0.2, 1.0)),
        material("metal", (0.9, 0.9, 0.9, 1.0), metallic=1.0, roughness=0.15),
        material("glass", (1.0, 1.0, 1.0, 1.0), roughness=0.0, transmission=1.0),
        material("satin", (0.2, 0.5, 0.8, 1.0), roughness=0.3)]
floor = material("floor", (0.6, 0.6, 0.55, 1.0), roughness=0.8)

bpy.ops.mesh.primitive_plane_add(size=60, location=(0.0, 0.0, 0.0))
bpy.context.object.data.materials.append(floor)
side = max(1, math.ceil(math.sqrt(objects)))
for i in range(objects):
    x, y = (i % side - (side - 1) / 2) * 2.2, (i // side - (side - 1) / 2) * 2.2
    bpy.ops.mesh.primitive_uv_sphere_add(segments=48, ring_count=24, radius=0.9, location=(x, y, 0.9))
    bpy.ops.object.shade_smooth()
    bpy.context.object.data.materials.append(mats[i % len(mats)])

sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", type="SUN"))
sun.data.energy = 3.0
sun.rotation_euler = (math.radians(40), math.radians(10), math.radians(30))
area = bpy.data.objects.new("area", bpy.data.lights.new("area", type="AREA"))
area.data.energy = 800.0
area.data.size = 4.0
area.location = (-4.0, -6.0, 8.0)
area.rotation_euler = (math.radians(35), 0.0, math.radians(-30))
cam = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
dist = 4.0 + 2.4 * side
cam.location = (0.0, -dist, dist * 0.7)
cam.rotation_euler = (Vector((0.0, 0.0, 0.5)) - cam.location).to_track_quat("-Z", "Y").to_euler()
for o in (sun, area, cam):
    scene.collection.objects.link(o)
scene.camera = cam

start = time.perf_counter()
bpy.ops.render.render(write_still=True)
seconds = time.perf_counter() - start
img = bpy.data.images.load(out)
px = img.pixels[:]
rgb = [v for i, v in enumerate(px) if i % 4 != 3]
print(f"vb:blender version={bpy.app.version_string} threads={scene.render.threads} "
      f"samples={samples} size={width}x{height} objects={objects}")
print(f"vb:image {img.size[0]}x{img.size[1]} mean={sum(rgb) / max(1, len(rgb)):.6f}")
print(f"vb:render_s {seconds:.6f}")
print("vb:done")
"""

_HEAD = r"^vb:blender version=(\S+) threads=(\d+) samples=(\d+) size=(\d+)x(\d+) objects=(\d+)$"
_IMAGE = r"^vb:image (\d+)x(\d+) mean=([0-9.]+)$"
_RENDER = r"^vb:render_s ([0-9]+\.[0-9]+)$"
_DONE = r"^vb:done$"


class BlenderParams(Params):
    width: int = Field(320, ge=16, le=7680, description="image width in pixels")
    height: int = Field(180, ge=16, le=4320, description="image height in pixels")
    samples: int = Field(16, ge=1, le=65536, description="Cycles samples per pixel (no adaptive sampling)")
    objects: int = Field(16, ge=1, le=2500, description="spheres in the generated scene (a square grid)")
    threads: int = Field(0, ge=0, le=1024, description="render threads; 0: Blender's default, one per visible CPU")


class Blender(Benchmark):
    """Cycles CPU render time of a generated scene, timed inside Blender."""

    name: ClassVar[str] = "blender"
    tool: ClassVar[str] = "blender"
    packages: ClassVar[tuple[str, ...]] = ("blender",)
    Params: ClassVar[type[Params]] = BlenderParams
    description: ClassVar[str] = "Blender Cycles: CPU render time of a generated scene"
    study: ClassVar[dict[str, Any]] = {"width": 1920, "height": 1080, "samples": 128, "objects": 36}
    """The `full` profile: LSBS rendered a whole scene (Classroom) at full HD; tens of seconds
    to minutes per render on a few cores."""

    params: BlenderParams

    def metrics(self) -> list[Metric]:
        p = self.params
        return [Metric("render_s", "s", False, "application",
                       f"Cycles CPU render of {p.objects} spheres at {p.width}x{p.height}, "
                       f"{p.samples} samples, wall time inside Blender")]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        return ["blender", "--background", "--factory-startup", "-noaudio", "--python-exit-code", "1",
                "--python-expr", SCRIPT, "--", f"{workdir.rstrip('/')}/render.png",
                str(p.width), str(p.height), str(p.samples), str(p.objects), str(p.threads)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        p = self.params
        search(_DONE, stdout, self.tool, source, re.M)
        head = search(_HEAD, stdout, self.tool, source, re.M)
        want = (p.samples, p.width, p.height, p.objects)
        if tuple(int(head.group(i)) for i in (3, 4, 5, 6)) != want:
            raise ParseError(self.tool, f"a render of samples/size/objects {want} (got {head.group(0)!r})", source)
        image = search(_IMAGE, stdout, self.tool, source, re.M)
        if (int(image.group(1)), int(image.group(2))) != (p.width, p.height):
            raise ParseError(self.tool, f"a {p.width}x{p.height} image (got {image.group(0)!r})", source)
        if float(image.group(3)) <= 0.0:
            raise ParseError(self.tool, f"a rendered image that is not black (got {image.group(0)!r})", source)
        seconds = float(search(_RENDER, stdout, self.tool, source, re.M).group(1))
        if seconds <= 0:
            raise ParseError(self.tool, f"a positive render time (got {seconds})", source)
        return {"render_s": seconds}

    def version_command(self) -> list[str]:
        return ["blender", "--background", "--factory-startup", "--version"]

    def execution_timeout(self) -> float:
        p = self.params
        # ~2e-6 s per pixel-sample and sphere on one x86 core; emulated VMs are ~20x slower
        work = p.width * p.height * p.samples * (1 + p.objects / 16)
        return 300.0 + 4e-5 * work
