"""The synthetic shapes world: small PIL-rendered scenes with known boxes, in COCO and GQA layouts.

It is the project's embedded default data and the fixture of the tests, designed so
that every COCO family and every GQA family can be built from it:

- seven shape categories in three supercategories (COCO ``categories`` with
  ``supercategory``), 2-4 shapes per image, a second instance of a category in about a
  quarter of the images (for counts and the "exactly one instance" rules);
- colours, sizes and materials as GQA attributes (``["red", "small", "metal"]``); the
  material is drawn as a texture (wooden: dark horizontal grain, metal: light diagonal
  sheen, plastic: plain) from a separate random stream, so adding it left the scenes,
  captions and boxes of earlier versions unchanged;
- boxes placed without overlap, so left/right, above/below and size relations hold
  with clear margins in many images and fail in others;
- five template captions per image with synonyms and plurals (for the coarse
  families' mention matching), each naming only objects that are present.

Layout written by :func:`write_shapes_world` under ``out``::

    annotations/instances_train2017.json  annotations/captions_train2017.json
    annotations/instances_val2017.json    annotations/captions_val2017.json
    train2017/000000000001.jpg ...        val2017/...
    train_sceneGraphs.json                val_sceneGraphs.json
    shapes_world.json                     (generation parameters)

Scene-graph entries carry ``file_name`` (the same JPEG as the COCO layout) so no image
is stored twice. Relations: ``to the left of``/``to the right of`` (box centres apart by
at least ``RELATION_MARGIN`` x width), ``above``/``below`` (same with height),
``bigger than``/``smaller than`` (box areas in a ratio of at least ``SIZE_RATIO``).

Generation is deterministic: the same ``n_images``, ``seed`` and ``image_size`` give
byte-identical files (JSON with sorted keys, JPEG from the same pixels and settings).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from pydantic import Field

from clip_cycles.data.sources.shape_vocabulary import CATEGORIES, SHAPE_WORDS
from clip_cycles.outputs import atomic_write_bytes, output_error, recover_sets, replace_folder, set_target, staging_folder
from clip_cycles.regular_files import load_json_text, read_regular_file
from clip_cycles.schemas.options import Options
from clip_cycles.verbosity import progress_disable

logger = logging.getLogger(__name__)

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 205, 30),
    "purple": (140, 50, 180),
    "orange": (245, 130, 20),
}

#: Side length of a shape as a fraction of the image side, per size attribute.
SIZE_RANGES: dict[str, tuple[float, float]] = {"small": (0.14, 0.2), "large": (0.3, 0.4)}

#: Materials and their texture: (stripe direction, stripe period in px, blend towards black/white).
MATERIALS: dict[str, tuple[str, int, float]] = {
    "plastic": ("none", 0, 0.0),
    "wooden": ("horizontal", 3, -0.45),
    "metal": ("diagonal", 4, 0.55),
}

#: Scene-graph relation margins (fractions of width/height) and the size ratio.
RELATION_MARGIN: float = 0.1
SIZE_RATIO: float = 1.5

_NUMBER_WORDS = {2: "two", 3: "three", 4: "four"}
_BACKGROUNDS = ((245, 245, 245), (235, 235, 225), (225, 232, 240))


@dataclass(frozen=True)
class Shape:
    """One drawn shape: category name, colour, size and material attributes, box (x, y, w, h) in pixels."""

    name: str
    colour: str
    size: str
    box: tuple[int, int, int, int]
    material: str = "plastic"


def plural(word: str) -> str:
    """English plural of a shape word (``cross`` -> ``crosses``, ``plus sign`` -> ``plus signs``)."""
    return word + "es" if word.endswith(("s", "x", "ch", "sh")) else word + "s"


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _place(rng: np.random.Generator, sizes: list[int], image_size: int, gap: int) -> list[tuple[int, int]] | None:
    placed: list[tuple[int, int, int]] = []
    for side in sizes:
        for _ in range(60):
            x = int(rng.integers(1, image_size - side))
            y = int(rng.integers(1, image_size - side))
            if all(
                x + side + gap <= px or px + ps + gap <= x or y + side + gap <= py or py + ps + gap <= y for px, py, ps in placed
            ):
                placed.append((x, y, side))
                break
        else:
            return None
    return [(x, y) for x, y, _ in placed]


def sample_scene(rng: np.random.Generator, image_size: int) -> list[Shape]:
    """Draw the shapes of one image: 2-4 objects, sometimes two of one category, no overlaps."""
    names = [name for _, name, _ in CATEGORIES]
    while True:
        n = int(rng.integers(2, 5))
        chosen = [names[i] for i in rng.choice(len(names), size=n, replace=False).tolist()]
        if n >= 3 and rng.random() < 0.3:
            chosen[-1] = chosen[0]
        sizes_attr = ["small" if rng.random() < 0.55 else "large" for _ in chosen]
        sides = [max(6, int(round(rng.uniform(*SIZE_RANGES[s]) * image_size))) for s in sizes_attr]
        positions = _place(rng, sides, image_size, gap=max(1, image_size // 32))
        if positions is None:
            continue
        colours = list(COLOURS)
        return [
            Shape(name, colours[int(rng.integers(len(colours)))], size, (x, y, side, side))
            for name, size, side, (x, y) in zip(chosen, sizes_attr, sides, positions)
        ]


def _polygon(name: str, x: float, y: float, s: float) -> list[tuple[float, float]]:
    cx, cy = x + s / 2, y + s / 2
    if name == "triangle":
        return [(cx, y), (x + s, y + s), (x, y + s)]
    if name == "diamond":
        return [(cx, y), (x + s, cy), (cx, y + s), (x, cy)]
    if name == "star":
        angles = np.pi / 2 + np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, s / 2, s / 5)
        return [(cx + r * np.cos(a), cy - r * np.sin(a)) for a, r in zip(angles.tolist(), radii.tolist())]
    t = s / 3  # cross: a plus sign with arms one third wide
    return [
        (x + t, y), (x + 2 * t, y), (x + 2 * t, y + t), (x + s, y + t), (x + s, y + 2 * t), (x + 2 * t, y + 2 * t),
        (x + 2 * t, y + s), (x + t, y + s), (x + t, y + 2 * t), (x, y + 2 * t), (x, y + t), (x + t, y + t),
    ]  # fmt: skip


def render(shapes: Sequence[Shape], image_size: int, background: tuple[int, int, int]) -> Any:
    """Render the shapes on a plain background; returns a PIL RGB image."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (image_size, image_size), background)
    for shape in shapes:
        colour = COLOURS[shape.colour]
        mask = Image.new("L", image.size, 0)
        _draw_shape(ImageDraw.Draw(mask), shape, 255)
        image.paste(colour, mask=mask)
        direction, period, blend = MATERIALS[shape.material]
        if direction != "none":
            target = 0 if blend < 0 else 255
            stripe = tuple(int(round(c + abs(blend) * (target - c))) for c in colour)
            rows, cols = np.mgrid[0:image_size, 0:image_size]
            lines = (rows if direction == "horizontal" else rows + cols) % period == 0
            texture = Image.fromarray((np.asarray(mask) * lines).astype(np.uint8), mode="L")
            image.paste(stripe, mask=texture)
    return image


def _draw_shape(draw: Any, shape: Shape, fill: Any) -> None:
    x, y, w, h = shape.box
    end = (x + w - 1, y + h - 1)
    if shape.name == "circle":
        draw.ellipse([(x, y), end], fill=fill)
    elif shape.name == "ring":
        draw.ellipse([(x, y), end], outline=fill, width=max(2, w // 5))
    elif shape.name == "square":
        draw.rectangle([(x, y), end], fill=fill)
    else:
        draw.polygon(_polygon(shape.name, x, y, w - 1), fill=fill)


def _centre(box: tuple[int, int, int, int]) -> tuple[float, float]:
    return box[0] + box[2] / 2, box[1] + box[3] / 2


def relations(shapes: Sequence[Shape], image_size: int) -> list[list[tuple[str, int]]]:
    """Scene-graph relations of each shape: (relation name, index of the other shape)."""
    out: list[list[tuple[str, int]]] = [[] for _ in shapes]
    margin = RELATION_MARGIN * image_size
    for i, a in enumerate(shapes):
        (ax, ay), area_a = _centre(a.box), a.box[2] * a.box[3]
        for j, b in enumerate(shapes):
            if i == j:
                continue
            (bx, by), area_b = _centre(b.box), b.box[2] * b.box[3]
            if bx - ax >= margin:
                out[i].append(("to the left of", j))
            if ax - bx >= margin:
                out[i].append(("to the right of", j))
            if by - ay >= margin:
                out[i].append(("above", j))
            if ay - by >= margin:
                out[i].append(("below", j))
            if area_a >= SIZE_RATIO * area_b:
                out[i].append(("bigger than", j))
            if area_b >= SIZE_RATIO * area_a:
                out[i].append(("smaller than", j))
    return out


def _phrase(rng: np.random.Generator, name: str, count: int, colour: str | None) -> str:
    words = SHAPE_WORDS[name]
    word = words[int(rng.integers(len(words)))]
    if count > 1:
        return f"{_NUMBER_WORDS[count]} {plural(word)}"
    described = f"{colour} {word}" if colour else word
    return f"{_article(described)} {described}"


def captions(rng: np.random.Generator, shapes: Sequence[Shape], n: int = 5) -> list[str]:
    """``n`` template captions naming present objects (a subset or all), with synonyms and plurals."""
    counts: dict[str, int] = {}
    first_colour: dict[str, str] = {}
    for shape in shapes:
        counts[shape.name] = counts.get(shape.name, 0) + 1
        first_colour.setdefault(shape.name, shape.colour)
    names = list(counts)
    templates = ("{}", "a picture of {}", "{} on a plain background", "a drawing with {}", "this image shows {}")
    out = []
    for k in range(n):
        if k == 0:
            take = names
        else:
            size = int(rng.integers(1, len(names) + 1))
            take = [names[i] for i in sorted(rng.choice(len(names), size=size, replace=False).tolist())]
        parts = []
        for m in take:
            colour = first_colour[m] if counts[m] == 1 and rng.random() < 0.5 else None
            parts.append(_phrase(rng, m, counts[m], colour))
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        out.append(templates[k % len(templates)].format(listed))
    return out


class ShapesWorldOptions(Options):
    """The settings of one shapes world (``clip-cycles build shapes``), ranges declared once.

    The field defaults are the project's one default world (:data:`DEFAULT_WORLD`): the demo's,
    ``build shapes`` with no flags and a ``cycles/shapes_*`` task given no root all use it.
    """

    n_images: int = Field(1000, ge=4, json_schema_extra={"flag": "--n-images"}, description="a count >= 4 of images")
    seed: int = Field(0, ge=0, json_schema_extra={"flag": "--seed"}, description="a non-negative generation seed")
    image_size: int = Field(
        64, ge=64, le=128, json_schema_extra={"flag": "--image-size"}, description="an image side in [64, 128] pixels"
    )
    val_fraction: float = Field(
        0.25,
        gt=0.0,
        lt=1.0,
        json_schema_extra={"flag": "--val-fraction"},
        description="a fraction in (0, 1) of the images for val2017",
    )

    def describe(self) -> str:
        """One line naming the world: ``shapes world: 1000 images, 64 px, seed 0, val 0.25``."""
        return f"shapes world: {self.n_images} images, {self.image_size} px, seed {self.seed}, val {self.val_fraction:g}"

    def folder_name(self) -> str:
        """The folder a cached copy of this world lives in: ``shapes_world-n1000-s0-p64-v0.25``."""
        return f"shapes_world-n{self.n_images}-s{self.seed}-p{self.image_size}-v{self.val_fraction:g}"


#: The one default shapes world: the demo's, ``clip-cycles build shapes`` with no flags, and the raw
#: root of a ``cycles/shapes_*`` task given none (:func:`cached_world`). README.md's figures come from it.
DEFAULT_WORLD: ShapesWorldOptions = ShapesWorldOptions.make()


def generate_world(
    n_images: int = DEFAULT_WORLD.n_images,
    seed: int = DEFAULT_WORLD.seed,
    image_size: int = DEFAULT_WORLD.image_size,
    val_fraction: float = DEFAULT_WORLD.val_fraction,
) -> dict[str, Any]:
    """The world as plain data: per image id its split, shapes, captions and background.

    Image ids are 1..n_images; the last ``round(val_fraction * n_images)`` go to val2017.
    The settings are checked by :class:`ShapesWorldOptions`.
    """
    ShapesWorldOptions.make(n_images=n_images, seed=seed, image_size=image_size, val_fraction=val_fraction)
    n_val = max(1, int(round(val_fraction * n_images)))
    rng = np.random.default_rng(seed)
    material_rng = np.random.default_rng([seed, 1])  # its own stream: scenes do not depend on it
    materials = list(MATERIALS)
    images = []
    for image_id in range(1, n_images + 1):
        shapes = [replace(s, material=materials[int(material_rng.integers(len(materials)))])
                  for s in sample_scene(rng, image_size)]  # fmt: skip
        images.append(
            {
                "id": image_id,
                "split": "val2017" if image_id > n_images - n_val else "train2017",
                "shapes": shapes,
                "captions": captions(rng, shapes),
                "background": _BACKGROUNDS[int(rng.integers(len(_BACKGROUNDS)))],
            }
        )
    return {"n_images": n_images, "seed": seed, "image_size": image_size, "val_fraction": val_fraction, "images": images}


def _dump(path: Path, data: Any) -> None:
    # Compact, as COCO and GQA ship their annotation files; atomic, so an interrupted run leaves no half file.
    atomic_write_bytes(path, json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def write_shapes_world(
    out: str | Path,
    n_images: int = DEFAULT_WORLD.n_images,
    seed: int = DEFAULT_WORLD.seed,
    image_size: int = DEFAULT_WORLD.image_size,
    progress: bool | None = None,
    val_fraction: float = DEFAULT_WORLD.val_fraction,
) -> Path:
    """Generate and write the shapes world (COCO layout + GQA scene graphs) under ``out``; returns ``out``.

    ``out`` must be new, empty, or a shapes world written before (which is then
    replaced whole); a folder holding anything else (a COCO layout, other files) is
    refused, so existing annotations and images are never overwritten. The world is
    written into a temporary sibling and moved into place when complete.
    """
    given = Path(out)
    out = set_target(given)  # a symlinked --out: its target is rewritten, the link stays
    world = generate_world(n_images, seed, image_size, val_fraction)
    recover_sets(out)  # a build killed while moving its files into a mount point is finished first
    foreign = _foreign_files(out)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ValueError(
            f"--out {out} holds files that are not a shapes world written by clip_cycles ({shown}); "
            "`build shapes` never writes into existing annotations or images: choose a new or empty folder"
        )
    staging = staging_folder(out)  # stale staging folders of killed builds of this --out are removed
    try:
        _write_world(staging, world, image_size, progress)
        replace_folder(staging, out)
    except OSError as error:
        raise output_error(error, out, f"free space on that disk or choose another --out; {given} was left as it was") from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return given


_WORLD_FILE = re.compile(
    r"^(shapes_world\.json|(train|val)_sceneGraphs\.json|annotations/(instances|captions)_(train|val)2017\.json"
    r"|(train|val)2017/\d{12}\.jpg)$"
)


def _foreign_files(out: Path) -> list[str]:
    """Files under ``out`` a shapes-world write may not replace (all of them unless ``out`` is a shapes world)."""
    if out.exists() and not out.is_dir():
        return [out.name]
    if not out.is_dir():
        return []
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir())
    if not files:
        return []
    try:
        marker = load_json_text(read_regular_file(out / "shapes_world.json", MAX_MARKER_BYTES, "world file"), "world file")
        ours = isinstance(marker, dict) and marker.get("kind") == "shapes"
    except (OSError, ValueError):
        ours = False
    if not ours:
        return files
    return [name for name in files if not _WORLD_FILE.match(name)]


def _write_world(out: Path, world: dict[str, Any], image_size: int, progress: bool | None) -> None:
    from tqdm.auto import tqdm

    out.mkdir(parents=True, exist_ok=True)  # the staging folder, made empty by staging_folder
    (out / "annotations").mkdir(parents=True, exist_ok=True)
    categories = [{"id": i, "name": n, "supercategory": s} for i, n, s in CATEGORIES]
    cat_ids = {n: i for i, n, _ in CATEGORIES}
    disable = progress_disable(progress)
    per_split: dict[str, dict[str, Any]] = {}
    for split in ("train2017", "val2017"):
        (out / split).mkdir(exist_ok=True)
        per_split[split] = {"images": [], "instances": [], "captions": [], "graphs": {}}
    ann_id = caption_id = 0
    for image in tqdm(world["images"], desc="shapes world", disable=disable):
        split, image_id, shapes = image["split"], image["id"], image["shapes"]
        file_name = f"{image_id:012d}.jpg"
        render(shapes, image_size, image["background"]).save(out / split / file_name, quality=95)
        bucket = per_split[split]
        bucket["images"].append({"id": image_id, "file_name": file_name, "width": image_size, "height": image_size})
        for shape in shapes:
            ann_id += 1
            x, y, w, h = shape.box
            bucket["instances"].append(
                {
                    "id": ann_id, "image_id": image_id, "category_id": cat_ids[shape.name], "bbox": [x, y, w, h],
                    "area": w * h, "iscrowd": 0, "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
                }
            )  # fmt: skip
        for text in image["captions"]:
            caption_id += 1
            bucket["captions"].append({"id": caption_id, "image_id": image_id, "caption": text})
        rels = relations(shapes, image_size)
        objects = {}
        for k, shape in enumerate(shapes):
            x, y, w, h = shape.box
            objects[str(image_id * 10 + k)] = {
                "name": shape.name, "x": x, "y": y, "w": w, "h": h, "attributes": [shape.colour, shape.size, shape.material],
                "relations": [{"name": r, "object": str(image_id * 10 + j)} for r, j in rels[k]],
            }  # fmt: skip
        bucket["graphs"][str(image_id)] = {
            "width": image_size, "height": image_size, "objects": objects, "file_name": f"{split}/{file_name}",
        }  # fmt: skip
    info = {"description": "clip_cycles synthetic shapes world", "version": "1.0", "year": 2026}
    licenses = [{"id": 1, "name": "CC0-1.0", "url": "https://creativecommons.org/publicdomain/zero/1.0/"}]
    for split, bucket in per_split.items():
        head = {"info": info, "licenses": licenses, "images": bucket["images"]}
        instances = {**head, "annotations": bucket["instances"], "categories": categories}
        _dump(out / "annotations" / f"instances_{split}.json", instances)
        _dump(out / "annotations" / f"captions_{split}.json", {**head, "annotations": bucket["captions"]})
        _dump(out / f"{split.removesuffix('2017')}_sceneGraphs.json", bucket["graphs"])
    params = {key: world[key] for key in ("n_images", "seed", "image_size", "val_fraction")}
    _dump(out / "shapes_world.json", {"kind": "shapes", **params})


#: The largest shapes_world.json read (a few hundred bytes of parameters).
MAX_MARKER_BYTES = 1 << 20


def world_of(root: Path) -> ShapesWorldOptions | None:
    """The parameters a shapes world at ``root`` was written with (its ``shapes_world.json``), or None if it holds none."""
    try:
        marker = load_json_text(read_regular_file(Path(root) / "shapes_world.json", MAX_MARKER_BYTES, "world file"), "world file")
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("kind") != "shapes":
        return None
    try:
        return ShapesWorldOptions.make(**{key: marker[key] for key in ShapesWorldOptions.model_fields if key in marker})
    except ValueError:
        return None


def cached_world(data_cache_dir: str | Path, world: ShapesWorldOptions = DEFAULT_WORLD) -> Path:
    """``world`` (default: :data:`DEFAULT_WORLD`) under ``<data cache>/<world.folder_name()>``, generated once.

    The raw root of a ``cycles/shapes_*`` task given no root, and the demo's world: the same
    world in the same cache, so the demo's families, features and page examples are reused.
    The world is written into a staging sibling and moved into place when complete.
    """
    root = Path(data_cache_dir) / world.folder_name()
    if world_of(root) != world:
        logger.info("generating the %s in %s", world.describe(), root)
        write_shapes_world(root, **world.model_dump(), progress=None)
    else:
        logger.info("using the %s in %s", world.describe(), root)
    return root
