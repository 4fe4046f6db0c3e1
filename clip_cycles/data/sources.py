"""Raw sources (coco, gqa, shapes): how a raw root is recognised, fingerprinted and built from."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from clip_cycles.data import build
from clip_cycles.data import families as registry
from clip_cycles.fingerprints import file_fingerprint, listing_fingerprint


def raw_root_fingerprint(kind: str, root: Path, hash_cache: Path | None = None) -> dict[str, Any]:
    """Content fingerprint of a raw source root: its annotation files and its image listing.

    Annotation files (COCO ``annotations/*.json``, GQA ``*_sceneGraphs.json``, the shapes
    world's marker) enter by size, mtime and sha256 (remembered per file in
    ``hash_cache``); image folders by their listing with size and mtime, without reading
    the images. Any change gives a different fingerprint.
    """

    root = root.resolve()
    annotation_files = sorted({*root.glob("annotations/*.json"), *root.glob("*_sceneGraphs.json"),
                               *root.glob("shapes_world.json")})
    annotations = {p.relative_to(root).as_posix(): file_fingerprint(p, hash_cache) for p in annotation_files}
    image_dirs = ["train2017", "val2017"] if kind in ("coco", "shapes") else ["images"]
    if kind == "shapes":
        image_dirs = ["train2017", "val2017"]
    images = {name: listing_fingerprint(root / name) for name in image_dirs if (root / name).is_dir()}
    return {"kind": kind, "root": str(root), "annotations": annotations, "images": images}


def _fingerprint_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """What differs between two raw-root fingerprints, in words."""
    if not isinstance(old, dict):
        return "no source fingerprint was stored with the cached build"
    before, after = old.get("annotations", {}), new["annotations"]
    changed = [f"{name} {'removed' if name not in after else 'added' if name not in before else 'changed'}"
               for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]
    changed += [f"{name}/ listing changed" for name in sorted(set(old.get("images", {})) | set(new["images"]))
                if old.get("images", {}).get(name) != new["images"].get(name)]
    return ", ".join(changed) or "the fingerprint format changed"


def raw_source_kind(root: Path) -> str | None:
    """``"shapes"``, ``"coco"``, ``"gqa"`` or None for a directory that holds no raw source."""
    if (root / "shapes_world.json").is_file():
        return "shapes"
    if (root / "annotations" / "instances_val2017.json").is_file():
        return "coco"
    if any((root / name).is_file() for name in ("val_sceneGraphs.json", "train_sceneGraphs.json")):
        return "gqa"
    return None


def family_builder_source(family: str) -> str:
    """Which builder (``coco`` or ``gqa``) registers ``family``."""

    for source in ("coco", "gqa"):
        try:
            if family in registry.list_families(source):
                return source
        except (ValueError, ImportError):
            continue
    raise ValueError(f"no COCO or GQA builder registers a family named {family!r}")


def build_from_raw(source: str, raw_root: Path, families: Sequence[str], out: Path) -> Path:
    """Build ``families`` with builder ``source`` (coco | gqa) from ``raw_root`` into ``out``.

    Calls the builder API of :mod:`clip_cycles.data.build` (``build_coco_folder`` /
    ``build_gqa_folder``), the code behind ``clip-cycles build coco|gqa``, with its defaults.
    """

    builders = {"coco": build.build_coco_folder, "gqa": build.build_gqa_folder}
    # allow_empty: an unavailable family is reported per task (its reason), not a failed build.
    folder, _ = builders[source](raw_root, out, families=list(families), allow_empty=True)
    return Path(folder)
