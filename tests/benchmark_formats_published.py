"""Writers of tiny benchmarks in the formats their authors publish, for the adapter tests (issue 40).

Each writer lays files out as the benchmark ships them and returns what one comparison is, for
the tests' own computation of floors and ceilings:

- hard-negative formats: ``{subset: [(image, positive, negative), ...]}``;
- 2x2 block formats: ``{subset: [(image_0, image_1, caption_0, caption_1), ...]}``.

No images are written: blind floors and ceilings need only the text.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

Pairs = dict[str, list[tuple[str, str, str]]]
Blocks = dict[str, list[tuple[str, str, str, str]]]


def write_valse(root: Path) -> Pairs:
    """Two pieces: ``existence`` (one foil each) and ``actant-swap`` (same words swapped; a crossing pair
    on two images, which is one exact cycle); one foil equal to its caption is dropped."""
    existence = {
        "0": {
            "dataset": "visual7w",
            "original_split": "test",
            "dataset_idx": "v7w_2353",
            "linguistic_phenomena": "existence",
            "image_file": "v7w_2353.jpg",
            "caption": "There are no animals.",
            "foils": ["There are animals."],
            "classes": None,
            "classes_foil": None,
            "mturk": {"foil": 0, "caption": 3, "other": 0},
        },
        "1": {
            "dataset": "visual7w",
            "original_split": "test",
            "dataset_idx": "v7w_2354",
            "linguistic_phenomena": "existence",
            "image_file": "v7w_2354.jpg",
            "caption": "There is a dog.",
            "foils": ["There is no dog in the picture."],
            "mturk": {"foil": 0, "caption": 3, "other": 0},
        },
    }
    swap = {
        "a": {
            "dataset": "SWiG",
            "image_file": "pushing_1.jpg",
            "caption": "A man pushes a woman.",
            "foils": ["A woman pushes a man.", "A man pulls a woman."],
        },
        "b": {
            "dataset": "SWiG",
            "image_file": "pushing_2.jpg",
            "caption": "A woman pushes a man.",
            "foils": ["A man pushes a woman."],
        },
        "c": {
            "dataset": "SWiG",
            "image_file": "riding_1.jpg",
            "caption": "A child rides a horse.",
            "foils": ["A child rides a horse."],
        },
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "existence.json").write_text(json.dumps(existence, indent=2))
    (root / "actant-swap.json").write_text(json.dumps(swap, indent=2))
    out: Pairs = {}
    for name, data in (("existence", existence), ("actant-swap", swap)):
        out[name] = [
            (row["image_file"], row["caption"], foil) for row in data.values() for foil in row["foils"] if foil != row["caption"]
        ]
    return out


def write_vl_checklist(root: Path) -> Pairs:
    """``Attribute/vaw/color.json`` and ``Relation/swig/action.json`` (one entry with two negatives)."""
    color = [
        ["vg/VG_100K/2.jpg", {"POS": ["a red car parked"], "NEG": ["a blue car parked"]}],
        ["vg/VG_100K/3.jpg", {"POS": ["white clouds"], "NEG": ["grey clouds"]}],
    ]
    action = [
        ["swig/riding_10.jpg", {"POS": ["man ride horse"], "NEG": ["horse ride man", "man feed horse"]}],
        ["swig/cutting_3.jpg", {"POS": ["woman cut bread"], "NEG": ["bread cut woman"]}],
    ]
    out: Pairs = {}
    for name, data in (("Attribute/vaw/color", color), ("Relation/swig/action", action)):
        path = root / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        out[name] = [(image, p, n) for image, texts in data for p in texts["POS"] for n in texts["NEG"]]
    return out


def write_sugarcrepe_pp(root: Path) -> Pairs:
    """``swap_att.json`` and ``replace_obj.json``: items with two positives and one negative."""
    swap_att = {
        "0": {
            "filename": "000000000139.jpg",
            "caption": "a white cat on a black sofa",
            "caption2": "on a black couch sits a white cat",
            "negative_caption": "a black cat on a white sofa",
        },
        "1": {
            "filename": "000000000285.jpg",
            "caption": "a big bear near a small tree",
            "caption2": "a large bear stands near a little tree",
            "negative_caption": "a small bear near a big tree",
        },
    }
    replace_obj = [
        {
            "id": 7,
            "filename": "000000000632.jpg",
            "caption": "a bed next to a window",
            "caption2": "next to a window there is a bed",
            "negative_caption": "a sofa next to a window",
        }
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "swap_att.json").write_text(json.dumps(swap_att, indent=2))
    (root / "replace_obj.json").write_text(json.dumps(replace_obj, indent=2))
    out: Pairs = {}
    for name, rows in (("swap_att", list(swap_att.values())), ("replace_obj", replace_obj)):
        out[name] = [(r["filename"], r[k], r["negative_caption"]) for r in rows for k in ("caption", "caption2")]
    return out


CREPE_HEADER = ("image_id", "x", "y", "width", "height", "caption", "hard_negs")


def write_crepe(root: Path) -> Pairs:
    """A productivity CSV (swap) and a systematicity CSV, ``hard_negs`` a Python list literal as CREPE writes it."""
    prod = [
        ("2343729", 10, 20, 100, 80, "a dog on a couch", ["a couch on a dog", "a cat on a couch"]),
        ("2345678", 0, 0, 50, 50, "a red kite in a blue sky", ["a blue kite in a red sky"]),
    ]
    syst = [("1592", 5, 5, 60, 40, "a wooden table", ["a metal table", "a wooden chair", "a plastic table"])]
    files = {
        "prod_hard_negatives/prod_vg_hard_negs_swap_all": prod,
        "syst_hard_negatives/syst_vg_hard_negs_seen_compounds_in_laion": syst,
    }
    out: Pairs = {}
    for name, rows in files.items():
        path = root / f"{name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(CREPE_HEADER)
            for image_id, x, y, w, h, caption, negs in rows:
                writer.writerow([image_id, x, y, w, h, caption, repr(negs)])
        out[path.stem] = [(f"{r[0]}.jpg", r[5], n) for r in rows for n in r[6]]
    return out


def write_cola(root: Path) -> Blocks:
    """``COLA_multiobjects_matching_benchmark.json``: ``[image_1, caption_1, image_2, caption_2]`` entries."""
    entries = [
        [
            "https://cs.stanford.edu/people/rak248/VG_100K/2335.jpg",
            "square white plate and round blue cup",
            "https://cs.stanford.edu/people/rak248/VG_100K_2/17.jpg",
            "round white plate and square blue cup",
        ],
        [
            "https://cs.stanford.edu/people/rak248/VG_100K/12.jpg",
            "large tree and small bush",
            "https://cs.stanford.edu/people/rak248/VG_100K/99.jpg",
            "small green tree and large bush",
        ],
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "COLA_multiobjects_matching_benchmark.json").write_text(json.dumps(entries))
    return {"COLA_multiobjects_matching_benchmark": [(e[0], e[2], e[1], e[3]) for e in entries]}


def write_eqben(root: Path) -> Blocks:
    """``ann_json_finegrained_random.json``: ``{image0, caption0, image1, caption1}`` samples."""
    samples = [
        {
            "image0": "eqbenag/action/0001_a.png",
            "caption0": "a person opens the door",
            "image1": "eqbenag/action/0001_b.png",
            "caption1": "a person closes the door",
        },
        {
            "image0": "eqbenkubric_cnt/0007_0.png",
            "caption0": "there are three spheres",
            "image1": "eqbenkubric_cnt/0007_1.png",
            "caption1": "there are four spheres",
        },
        {
            "image0": "eqbensd/12_0.png",
            "caption0": "a cup left of a book",
            "image1": "eqbensd/12_1.png",
            "caption1": "a book left of a cup",
        },
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "ann_json_finegrained_random.json").write_text(json.dumps(samples, indent=1))
    return {"ann_json_finegrained_random": [(s["image0"], s["image1"], s["caption0"], s["caption1"]) for s in samples]}


MMVP_ROWS = [
    ("1", "Orientation and Direction", "The dog's face is facing left."),
    ("2", "Orientation and Direction", "The dog's face is facing right."),
    ("3", "Color and Appearance", "The flower is yellow."),
    ("4", "Color and Appearance", "The flower is purple."),
    ("5", "Orientation and Direction", "The car points up the hill."),
    ("6", "Orientation and Direction", "The car points down the hill."),
]


def write_mmvp_vlm(root: Path) -> Blocks:
    """``MMVP_VLM/Questions.csv`` with ``Question ID, Type, Statement``, rows in pairs."""
    folder = root / "MMVP_VLM"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "Questions.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Question ID", "Type", "Statement"])
        writer.writerows(MMVP_ROWS)
    out: Blocks = {}
    for first, second in zip(MMVP_ROWS[::2], MMVP_ROWS[1::2]):
        out.setdefault(first[1], []).append((f"{first[1]}/{first[0]}.jpg", f"{second[1]}/{second[0]}.jpg", first[2], second[2]))
    return out


def write_colorswap(root: Path) -> Blocks:
    """A ColorSwap table as JSON lines; one block repeats its caption and is dropped."""
    rows = [
        {
            "id": 0,
            "image_1": "0_1.png",
            "image_2": "0_2.png",
            "caption_1": "a red umbrella next to a blue bag",
            "caption_2": "a blue umbrella next to a red bag",
            "image_source": "midjourney",
            "caption_source": "human",
            "game_id": 3,
        },
        {
            "id": 1,
            "image_1": "1_1.png",
            "image_2": "1_2.png",
            "caption_1": "the green car is behind the orange fence",
            "caption_2": "the orange car is behind the green fence",
            "image_source": "dalle3",
            "caption_source": "human",
        },
        {
            "id": 2,
            "image_1": "2_1.png",
            "image_2": "2_2.png",
            "caption_1": "a pink cake",
            "caption_2": "a pink cake",
            "image_source": "dalle3",
            "caption_source": "human",
        },
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = [r for r in rows if r["caption_1"] != r["caption_2"]]
    return {"colorswap": [(r["image_1"], r["image_2"], r["caption_1"], r["caption_2"]) for r in kept]}
