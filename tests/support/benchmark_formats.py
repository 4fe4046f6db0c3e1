"""Writers of tiny benchmarks in their published formats, for the benchmark-audit tests.

Each writer lays files out as the real benchmark ships them (SugarCrepe's
``{id: {filename, caption, negative_caption}}`` JSON, Winoground's ``examples.jsonl``
with extension-less image names, ARO's VG JSON list with boxes and its order test cases,
the generic CSV table) and returns what the tests need to compute expectations by hand.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np


def write_image(path: Path, seed: int, size: tuple[int, int] = (40, 30), fmt: str | None = None) -> Path:
    """A small deterministic RGB image (random blocks), saved as ``fmt`` (default: from the suffix)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(size[1] // 10 + 1, size[0] // 10 + 1, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).resize(size, Image.NEAREST)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format=fmt)
    return path


#: SugarCrepe-format fixture: add_obj has a length artefact (every negative is the caption plus
#: an object); swap_att has two items whose captions cross, one without a partner, and one
#: crossing on the SAME image as another (which must not pair).
OBJECTS = ["cat", "dog", "bus", "cup", "kite", "sheep", "boat", "horse"]


def sugarcrepe_items() -> dict[str, dict[str, dict[str, str]]]:
    add_obj = {
        str(i): {
            "filename": f"{i:012d}.jpg",
            "caption": f"a {o} on the table",
            "negative_caption": f"a {o} and a {OBJECTS[(i + 3) % len(OBJECTS)]} on the table",
        }
        for i, o in enumerate(OBJECTS)
    }
    swap_att = {
        "100": {
            "filename": "000000000100.jpg",
            "caption": "a red cube and a blue ball",
            "negative_caption": "a blue cube and a red ball",
        },
        "101": {
            "filename": "000000000101.jpg",
            "caption": "a blue cube and a red ball",
            "negative_caption": "a red cube and a blue ball",
        },
        "102": {
            "filename": "000000000102.jpg",
            "caption": "a big dog near a small cat",
            "negative_caption": "a small dog near a big cat",
        },
        "103": {
            "filename": "000000000100.jpg",
            "caption": "a blue cube and a red ball",
            "negative_caption": "a red cube and a blue ball",
        },
    }
    return {"add_obj": add_obj, "swap_att": swap_att}


def write_sugarcrepe(root: Path, images: bool = True) -> dict[str, dict[str, dict[str, str]]]:
    items = sugarcrepe_items()
    root.mkdir(parents=True, exist_ok=True)
    for subset, data in items.items():
        (root / f"{subset}.json").write_text(json.dumps(data, indent=4))
    if images:
        names = sorted({row["filename"] for data in items.values() for row in data.values()})
        for k, name in enumerate(names):
            write_image(root / "val2017" / name, k, fmt="JPEG")
    return items


def winoground_rows() -> list[dict[str, object]]:
    rows = []
    pairs = [
        ("an old person kisses a young person", "a young person kisses an old person", "Relation", "Symbolic"),
        ("the dog is above the cat", "the cat is above the dog", "Relation", ""),
        ("a red mug and a white plate", "a white mug and a red plate", "Object", "Pragmatics"),
        ("there is less milk than coffee", "there is less coffee than milk", "Both", "Symbolic, Series"),
    ]
    for i, (c0, c1, tag, secondary) in enumerate(pairs):
        rows.append(
            {
                "id": i,
                "image_0": f"ex_{i}_img_0",
                "image_1": f"ex_{i}_img_1",
                "caption_0": c0,
                "caption_1": c1,
                "tag": tag.lower(),
                "secondary_tag": secondary,
                "num_main_preds": 1,
                "collapsed_tag": tag,
            }
        )
    return rows


def write_winoground(root: Path, hub_layout: bool = False) -> list[dict[str, object]]:
    """``examples.jsonl`` + ``images/ex_<i>_img_<k>.png`` (hub layout: under ``data/``)."""
    rows = winoground_rows()
    base = root / "data" if hub_layout else root
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "examples.jsonl", "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
        handle.write("\n")  # a trailing blank line, as exported files often have
    for i, row in enumerate(rows):
        for k in (0, 1):
            write_image(base / "images" / f"{row[f'image_{k}']}.png", 100 + 2 * i + k)
    return rows


def aro_vg_rows() -> list[dict[str, object]]:
    """VG-Relation rows: two items with the same relation reversed on different images, one alone."""
    return [
        {
            "image_id": "1",
            "relation_name": "on",
            "bbox_x": 2,
            "bbox_y": 3,
            "bbox_w": 20,
            "bbox_h": 10,
            "true_caption": "the man is on the horse",
            "false_caption": "the horse is on the man",
            "image_path": "1.jpg",
        },
        {
            "image_id": "2",
            "relation_name": "on",
            "bbox_x": 0,
            "bbox_y": 0,
            "bbox_w": 30,
            "bbox_h": 25,
            "true_caption": "the horse is on the man",
            "false_caption": "the man is on the horse",
            "image_path": "2.jpg",
        },
        {
            "image_id": "3",
            "relation_name": "holding",
            "bbox_x": 5,
            "bbox_y": 5,
            "bbox_w": 12,
            "bbox_h": 12,
            "true_caption": "the girl is holding the umbrella",
            "false_caption": "the umbrella is holding the girl",
            "image_path": "3.jpg",
        },
    ]


def aro_order_cases() -> list[dict[str, object]]:
    """COCO-Order test cases: the true caption first; one perturbation equals it (a no-op shuffle)."""
    return [
        {
            "image": "val2014/COCO_val2014_000000000001.jpg",
            "caption_options": [
                "a man riding a horse on a beach",
                "a horse riding a man on a beach",
                "man a riding horse a on beach a",
                "a man riding a horse on a beach",
                "beach a on horse a riding man a",
            ],
        },
        {
            "image": "val2014/COCO_val2014_000000000002.jpg",
            "caption_options": ["two dogs play in the snow", "two snow play in the dogs", "dogs two in play the snow"],
        },
    ]


def write_aro(root: Path) -> None:
    (root / "images").mkdir(parents=True, exist_ok=True)
    rows = aro_vg_rows()
    (root / "visual_genome_relation.json").write_text(json.dumps(rows))
    for k, row in enumerate(rows):
        write_image(root / "images" / str(row["image_path"]), 200 + k, fmt="JPEG")
    cases = aro_order_cases()
    (root / "coco_order.json").write_text(json.dumps(cases))
    for k, case in enumerate(cases):
        write_image(root / str(case["image"]), 300 + k, fmt="JPEG")


def write_table(path: Path, rows: list[dict[str, object]]) -> Path:
    """A comparison table (CSV with a BOM, as spreadsheet exports have, or JSON lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path
    fields = sorted(
        {k for r in rows for k in r},
        key=lambda k: (
            ["comparison_id", "image", "caption", "weight"].index(k)
            if k in ("comparison_id", "image", "caption", "weight")
            else 10
        ),
    )
    with open(path, "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def cycle_table_rows(n: int = 6) -> list[dict[str, object]]:
    """``n`` comparisons, each a whole 2x2 cycle (+1, -1, -1, +1); caption lengths differ a lot."""
    rows: list[dict[str, object]] = []
    for i in range(n):
        u1, u2 = f"img_{2 * i}.png", f"img_{2 * i + 1}.png"
        v1, v2 = f"short {i}", f"a much much longer caption number {i}" + " x" * i
        for image, caption, weight in ((u1, v1, 1), (u1, v2, -1), (u2, v1, -1), (u2, v2, 1)):
            rows.append(
                {
                    "comparison_id": f"c{i}",
                    "image": image,
                    "caption": caption,
                    "weight": weight,
                    "item_id": f"item{i}",
                    "tag": "even" if i % 2 == 0 else "odd",
                }
            )
    return rows


def write_features(
    path: Path,
    image_keys: list[str],
    captions: list[str],
    seed: int = 0,
    dim: int = 8,
    caption_shift: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A ``features``-backend npz: random image and caption features (plus optional per-caption shifts).

    Returns the L2-normalized float32 tables as the encoder serves them (row order = the given keys).
    """
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(len(image_keys), dim)).astype(np.float32)
    psi = rng.normal(size=(len(captions), dim)).astype(np.float32)
    for i, text in enumerate(captions):
        if caption_shift and text in caption_shift:
            psi[i] += caption_shift[text].astype(np.float32)
    np.savez(path, image_features=phi, caption_features=psi, image_keys=np.array(image_keys), caption_keys=np.array(captions))
    return phi / np.linalg.norm(phi, axis=1, keepdims=True), psi / np.linalg.norm(psi, axis=1, keepdims=True)
