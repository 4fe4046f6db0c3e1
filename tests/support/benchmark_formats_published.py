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

from clip_cycles.benchmark_audit.adapters import SUGARCREPE_PUBLISHED_SIZES

Pairs = dict[str, list[tuple[str, str, str]]]
Blocks = dict[str, list[tuple[str, str, str, str]]]


def _valse_instance(image: str, caption: str, foil, votes: int, dataset: str = "SWiG", piece: str = "actions") -> dict:
    """One instance laid out as VALSE's README shows it (``foil`` a string; a list is read as several foils)."""
    return {
        "dataset": dataset,
        "original_split": "test",
        "dataset_idx": image,
        "linguistic_phenomena": piece,
        "image_file": image,
        "caption": caption,
        "classes": None,
        "classes_foil": None,
        "mturk": {"foil": 3 - votes, "caption": votes, "other": 0},
        ("foil" if isinstance(foil, str) else "foils"): foil,
    }


def write_valse(root: Path) -> Pairs:
    """Two pieces: ``existence`` and ``actant-swap`` (same words swapped; a crossing pair on two images,
    which is one exact cycle); one foil equal to its caption and two instances outside the valid set
    (``mturk.caption`` < 2) are dropped. Returns the valid set's comparisons (format ``valse``)."""
    existence = {
        "existence_0": _valse_instance("v7w_2353.jpg", "There are no animals.", "There are animals.", 3, "visual7w", "existence"),
        "existence_1": _valse_instance(
            "v7w_2354.jpg", "There is a dog.", "There is no dog in the picture.", 2, "visual7w", "existence"
        ),
        "existence_2": _valse_instance("v7w_2355.jpg", "There are no cars.", "There are cars.", 1, "visual7w", "existence"),
    }
    swap = {
        "a": _valse_instance("pushing_1.jpg", "A man pushes a woman.", ["A woman pushes a man.", "A man pulls a woman."], 3),
        "b": _valse_instance("pushing_2.jpg", "A woman pushes a man.", "A man pushes a woman.", 2),
        "c": _valse_instance("riding_1.jpg", "A child rides a horse.", "A child rides a horse.", 3),
        "d": _valse_instance("riding_2.jpg", "A horse rides a child.", "A child rides a horse.", 0),
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "existence.json").write_text(json.dumps(existence, indent=4))
    (root / "actions").mkdir(exist_ok=True)  # where VALSE publishes the actant-swap piece
    (root / "actions" / "actant-swap.json").write_text(json.dumps(swap, indent=4))
    out: Pairs = {}
    for name, data in (("existence", existence), ("actant-swap", swap)):
        out[name] = [
            (row["image_file"], row["caption"], foil)
            for row in data.values()
            if row["mturk"]["caption"] >= 2
            for foil in ([row["foil"]] if "foil" in row else row["foils"])
            if foil != row["caption"]
        ]
    return out


def write_vl_checklist(root: Path) -> Pairs:
    """``Attribute/vg/color.json`` and ``Relation/swig/action.json`` (one entry with two negatives), laid out
    as the published files are: Visual Genome paths ``VG_100K[_2]/<id>.jpg``, an entry repeated, and an
    entry whose negative equals its positive (the published color file holds one; it is dropped)."""
    color = [
        ["VG_100K/2376832.jpg", {"POS": ["brown knob"], "NEG": ["teal knob"]}],
        ["VG_100K_2/2417425.jpg", {"POS": ["man WEARING white shoe"], "NEG": ["man WEARING beige shoe"]}],
        ["VG_100K/498318.jpg", {"POS": ["yellow dress"], "NEG": ["blue dress"]}],
        ["VG_100K/498318.jpg", {"POS": ["yellow dress"], "NEG": ["blue dress"]}],
        ["VG_100K_2/2409589.jpg", {"POS": ["white stripes"], "NEG": ["white stripes"]}],
    ]
    action = [
        ["riding_10.jpg", {"POS": ["man ride horse"], "NEG": ["horse ride man", "man feed horse"]}],
        ["cutting_3.jpg", {"POS": ["woman cut bread"], "NEG": ["bread cut woman"]}],
    ]
    out: Pairs = {}
    for name, data in (("Attribute/vg/color", color), ("Relation/swig/action", action)):
        path = root / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        out[name] = [(image, p, n) for image, texts in data for p in texts["POS"] for n in texts["NEG"] if p != n]
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


#: SugarCrepe's published subset sizes (7,511 in all), and how many of swap_att's and swap_obj's reorder the
#: same words under the project's word rule ``\w+`` (574 in all; sugar-crepe#10), as the published files hold.
SUGARCREPE_SIZES = SUGARCREPE_PUBLISHED_SIZES
SUGARCREPE_SAME_WORDS = {"swap_att": 408, "swap_obj": 166}
#: Of those, how many swap a possessive ("a woman's head" / "a boy's head"): the same words under ``\w+`` but
#: not under ``[a-z0-9']+`` (apostrophes kept inside words), as in swap_obj's published file.
SUGARCREPE_POSSESSIVE_SWAPS = {"swap_obj": 2}


def write_sugarcrepe_published_sizes(root: Path) -> None:
    r"""SugarCrepe's seven files at the published sizes, with as many same-word negatives as the published files hold.

    Under ``\w+``: swap_att 1 - 408/1332, swap_obj 1 - 166/490, all 1 - 574/15022; under ``[a-z0-9']+``
    swap_obj's two possessive swaps are not ties (164, and 572 in all).
    """
    root.mkdir(parents=True, exist_ok=True)
    for subset, n in SUGARCREPE_SIZES.items():
        items = {}
        possessive = SUGARCREPE_POSSESSIVE_SWAPS.get(subset, 0)
        for i in range(n):
            caption = f"A white{i} Cat, on a black{i} sofa."
            if i < possessive:
                caption, negative = f"A white{i} cat on a black{i} dog's sofa.", f"a black{i} cat on a white{i} sofa's dog"
            elif i < SUGARCREPE_SAME_WORDS.get(subset, 0):
                negative = f"a black{i} cat on a white{i} sofa"  # same lowercase words, other order and case
            else:
                negative = f"a white{i} dog on a black{i} sofa"
            items[str(i)] = {"filename": f"{i:012d}.jpg", "caption": caption, "negative_caption": negative}
        (root / f"{subset}.json").write_text(json.dumps(items))
