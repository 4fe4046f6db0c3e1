"""Built dataset folders: Parquet per family/split/seed, the dataset card, build_info.json, and ``audit``.

Layout (DEVELOPING.md, "Built dataset folders"), reference mode (``layout: parquet``)::

    <out>/README.md                      card; YAML ``configs:`` names every available split's file
    <out>/build_info.json                source, families, counts, audits, unavailable, skipped, files
    <out>/data/<family>/seed<k>/{train,validation,test}.parquet

self-contained mode (``layout: imagefolder``): each image is stored once per build, as a file,
and the rows name it (``image_0_file_name``, ``image_1_file_name``, relative to ``data/``)::

    <out>/data/<family>-seed<k>-<split>.parquet      rows (the imagefolder builder's metadata files)
    <out>/data/images/<file relative to the source root>

``datasets`` reads the second layout with its packaged ``imagefolder`` builder: the card's
config lists its metadata files (``metadata_filenames``) and ``data/images/**``, and every
``*_file_name`` column becomes a decoded ``datasets.Image`` column of the same name without
the suffix, so ``load_dataset(out, "strict_size", split="test")`` yields Winoground's
``image_0``/``image_1`` either way. The metadata files sit in ``data/`` because ``datasets``
resolves file names below the metadata file's own folder only.

Config ``<family>`` is seed 0, ``<family>_seed<k>`` seed k, each with the splits that meet the
minimum-cycle rule; a short split is written but left out of ``configs:`` (the card's
``unavailable_splits`` and each config's description name it; :func:`clip_cycles.data.folder.reader.load_split`
loads it with a warning). Files are byte-identical for the same inputs and seed: rows in cycle
order, fixed schema and compression, no timestamps.

Builds are transactions: everything is written into a temporary sibling folder, checked
(:func:`verify_folder_files`), and only then moved into place, so a failed build leaves
the previous folder intact. An ``--out`` holding files the project did not write is
refused unless ``overwrite`` is given, and then only the project's own files (card,
``build_info.json``, the row files and stored images) are replaced. A build in which no
family has an available split is refused unless ``allow_empty``.

``build_info.json`` records each Parquet file's row count and sha256 under ``files`` and each
stored image's size and sha256 under ``images``; :func:`read_build_info` validates its shape and
:func:`verify_folder_files` the files, for evaluation and ``audit``.

The card's licence and citation are the raw root's source's (:func:`clip_cycles.data.sources.registry.card_for`):
families the COCO builder makes from the shapes world carry the world's CC0 card. The card names
no local path: the raw root is ``<coco root>`` (or ``<gqa root>``, ...); ``build_info.json`` keeps it.

``clip-cycles audit DIR`` lives in :mod:`clip_cycles.data.folder.audit`: it re-reads the folder
and the raw annotations without the builders' code.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
from collections import Counter
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping, Sequence

from clip_cycles.data.families.build_config import BuildConfig
from clip_cycles.data.families.registry import (
    ROW_COLUMNS,
    SPLITS,
    FamilyBuild,
    build_families,
    family_provenance,
)
from clip_cycles.data.folder.card_yaml import Quoted, card_header
from clip_cycles.data.sources.annotations import parse_json
from clip_cycles.data.sources.registry import SourceCard, card_for, fingerprint_changes, raw_root_fingerprint, source_feeding
from clip_cycles.fingerprints import canonical_json
from clip_cycles.outputs import OutputError, output_error, recover_sets, replace_folder, set_target, staged_name, staging_folder
from clip_cycles.regular_files import load_json_text, read_regular_file
from clip_cycles.results import write_json
from clip_cycles.schemas.build_info import FOLDER_LAYOUTS, FOLDER_MODES, FORMAT_VERSION, BuildInfo, newer_format_problem
from clip_cycles.schemas.declared import validate
from clip_cycles.settings import resolve_cache_dir
from clip_cycles.verbosity import progress_disable

MODES: tuple[str, ...] = FOLDER_MODES
#: How rows and images are stored: per-file Parquet (reference mode, and self-contained folders of
#: earlier versions with the image bytes inside every row) or imagefolder (images stored once).
LAYOUTS: tuple[str, ...] = FOLDER_LAYOUTS
LAYOUT_OF_MODE: dict[str, str] = {"reference": "parquet", "self_contained": "imagefolder"}
#: Folder of the stored images (imagefolder layout), and the prefix of the file names in the rows.
IMAGE_DIR: str = "data/images"
IMAGE_PREFIX: str = "images/"
#: Extensions ``datasets``' imagefolder builder takes as images (a stored image must have one).
IMAGE_EXTENSIONS: frozenset[str] = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})
#: Columns written: the row schema, with ``predicate`` as a struct and its JSON text kept beside it.
FOLDER_COLUMNS: tuple[str, ...] = (*ROW_COLUMNS, "predicate_json")

PAPER_CITATION = (
    "@inproceedings{cycles2026,\n  title={Can the Parts Fool the Test? Counterfactual Pairing Cycles for "
    "CLIP-like Models},\n  booktitle={NeurIPS},\n  year={2026}\n}"
)


def layout_of(info: Mapping[str, Any]) -> str:
    """The storage layout of a folder from its ``build_info.json`` (folders without the key: ``parquet``)."""
    return str(info.get("layout", "parquet"))


def _column_names(layout: str) -> list[str]:
    """Column names in file order: imagefolder names the image files ``image_<k>_file_name``."""
    rename = {"image_0": "image_0_file_name", "image_1": "image_1_file_name"} if layout == "imagefolder" else {}
    return [rename.get(name, name) for name in FOLDER_COLUMNS]


def parse_predicates(texts: Iterable[str], parsed: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each distinct predicate text parsed once (:func:`parse_json`), keyed by text in first-seen order.

    ``parsed`` (a family's memo) is extended in place and returned. Rows repeat their predicate
    (a relation cycle's meanings recur over seeds), and the parsed values are only read, never
    changed, so rows may share them.
    """
    parsed = {} if parsed is None else parsed
    for text in texts:
        if text not in parsed:
            parsed[text] = parse_json(text)
    return parsed


def predicate_type(predicates: Iterable[str], parsed: dict[str, Any] | None = None) -> Any:
    """The pyarrow struct type of parsed predicate JSON texts (the union of their fields).

    One type per family, over every seed and split, so all files of a config share their
    features. ValueError names the predicate that cannot be typed (mixed value types) or a
    field that is always an empty object (Parquet cannot store a struct without fields).
    ``parsed`` is a memo of :func:`parse_predicates` (text -> value), filled as needed.
    """
    import pyarrow as pa

    # The distinct texts in first-seen order infer the type every row would: a repeated value
    # adds no field and no value type, and struct fields keep the order they first appear in.
    texts = list(dict.fromkeys(predicates))
    parsed = parse_predicates(texts, parsed)
    values = [parsed[text] for text in texts]
    if not values:
        return pa.struct([("stratum", pa.string())])
    try:
        kind = pa.array(values).type
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise ValueError(f"predicate values cannot share one struct type ({error}); e.g. {values[0]}") from None

    def check(t: Any, where: str) -> None:
        if pa.types.is_struct(t):
            if t.num_fields == 0:
                raise ValueError(f"predicate field {where or '(top)'} is always an empty object; it cannot be a struct field")
            for i in range(t.num_fields):
                check(t.field(i).type, f"{where}.{t.field(i).name}".lstrip("."))
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            check(t.value_type, f"{where}[]")

    check(kind, "")
    return kind


def _feature(kind: Any) -> Any:
    """The ``datasets`` feature dict (as in Parquet's ``huggingface`` metadata) of a pyarrow type."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        return {kind.field(i).name: _feature(kind.field(i).type) for i in range(kind.num_fields)}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return {"_type": "List", "feature": _feature(kind.value_type)}
    return {"_type": "Value", "dtype": "string" if pa.types.is_string(kind) else str(kind)}


def _features(mode: str, predicate: Any) -> dict[str, Any]:
    layout = LAYOUT_OF_MODE[mode]
    string, int64 = {"_type": "Value", "dtype": "string"}, {"_type": "Value", "dtype": "int64"}
    kinds = {"seed": int64, "image_id_0": int64, "image_id_1": int64, "predicate": _feature(predicate)}
    return {name: kinds.get(name, string) for name in _column_names(layout)}


def _schema(mode: str, predicate: Any) -> Any:
    import pyarrow as pa

    layout = LAYOUT_OF_MODE[mode]
    kinds = {"seed": pa.int64(), "image_id_0": pa.int64(), "image_id_1": pa.int64(), "predicate": predicate}
    # Nullable like the schema datasets derives from the features, which it compares field by field.
    fields = [pa.field(name, kinds.get(name, pa.string())) for name in _column_names(layout)]
    metadata = {"huggingface": canonical_json({"info": {"features": _features(mode, predicate)}})}
    return pa.schema(fields, metadata=metadata)


def encode_parquet(records: Sequence[Any], mode: str, predicate: Any = None, parsed: dict[str, Any] | None = None) -> bytes:
    """The Parquet bytes of one split's :class:`~clip_cycles.data.families.registry.CycleRecord` rows; same rows, same bytes.

    ``predicate`` is the family's struct type (:func:`predicate_type`; default: this split's);
    ``parsed`` the family's memo of parsed predicates (:func:`parse_predicates`), so each text is
    parsed once per build. Self-contained rows name their images under ``images/``
    (:func:`store_images` writes them).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    texts = [r.predicate for r in records]
    parsed = parse_predicates(texts, parsed)
    predicate = predicate_type(texts, parsed) if predicate is None else predicate
    # Column lists, as Table.from_pylist would gather them from row dicts (the same table, without the dicts).
    prefix = IMAGE_PREFIX if mode == "self_contained" else ""
    columns = {name: [getattr(r, name) for r in records] for name in ROW_COLUMNS if name not in ("image_0", "image_1")}
    columns["predicate"] = [parsed[text] for text in texts]
    columns["predicate_json"] = texts
    for side in ("image_0", "image_1"):
        name = f"{side}_file_name" if mode == "self_contained" else side
        columns[name] = [prefix + getattr(r, side) for r in records]
    schema = _schema(mode, predicate)
    table = pa.Table.from_pydict({name: columns[name] for name in schema.names}, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=3, row_group_size=4096)
    return sink.getvalue().to_pybytes()


def write_parquet(
    path: Path,
    records: Sequence[Any],
    mode: str,
    root: Path,
    predicate: Any = None,
    parsed: dict[str, Any] | None = None,
    encoded: bytes | None = None,
) -> None:
    """Write one split's rows to ``path``: :func:`encode_parquet`'s bytes, or ``encoded``, the bytes
    :func:`encode_family` already made of these rows (on the worker that built the family)."""
    data = encode_parquet(records, mode, predicate, parsed) if encoded is None else encoded
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


def encode_family(build: FamilyBuild, mode: str) -> None:
    """Encode every Parquet file of ``build`` into ``build.encoded`` (key: mode and folder path).

    The build calls it where the family was built, so on ``--num-proc`` workers the encoding
    runs in parallel; :func:`write_folder` then writes the bytes as they are.
    """
    layout = LAYOUT_OF_MODE[mode]
    parsed: dict[str, Any] = {}  # each predicate text of the family parsed once, for its type and its rows
    kind = predicate_type((r.predicate for splits in build.records.values() for s in SPLITS for r in splits[s]), parsed)
    for seed, splits in sorted(build.records.items()):
        for split in SPLITS:
            build.encoded[mode, parquet_path(build.name, seed, split, layout)] = encode_parquet(splits[split], mode, kind, parsed)


def _image_name(file_name: str, image_id: int) -> str:
    """A source-relative image file name that can be stored below ``data/images/``; ValueError otherwise."""
    name = PurePosixPath(file_name)
    if not file_name or name.is_absolute() or ".." in name.parts or "\\" in file_name or "://" in file_name:
        raise ValueError(
            f"self-contained mode: image id {image_id} has file name {file_name!r}, not a path relative to the "
            "source root; fix the annotations or build in reference mode"
        )
    if name.suffix.lower() not in IMAGE_EXTENSIONS:
        raise ValueError(
            f"self-contained mode: image file {file_name!r} of image id {image_id} has no image extension "
            f"({', '.join(sorted(IMAGE_EXTENSIONS))}), so datasets' imagefolder would not ship it; build in reference mode"
        )
    return name.as_posix()


def store_images(out: Path, root: Path, builds: Sequence[FamilyBuild]) -> dict[str, dict[str, Any]]:
    """Copy every image the written rows use, once, to ``out/data/images/``; returns path -> {bytes, sha256}.

    A missing or empty image file is an error naming it and its image id.
    """
    first_id: dict[str, int] = {}
    for build in builds:
        for _, splits in sorted(build.records.items()):
            for split in SPLITS:
                for record in splits[split]:
                    first_id.setdefault(record.image_0, record.image_id_0)
                    first_id.setdefault(record.image_1, record.image_id_1)
    extensions = Counter(PurePosixPath(name).suffix.lower() for name in first_id)
    if first_id and max(extensions.values()) < 2:
        # datasets picks its builder by the most common extension (Parquet wins a tie).
        raise ValueError(
            f"self-contained mode: the {len(first_id)} images have no extension in common ({dict(extensions)}); "
            "datasets would read the folder as plain Parquet. Build in reference mode"
        )
    stored: dict[str, dict[str, Any]] = {}
    for file_name in sorted(first_id):
        name = _image_name(file_name, first_id[file_name])
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(
                f"self-contained mode: image file {path} of image id {first_id[file_name]} is missing; "
                "restore it or build in reference mode"
            )
        data = path.read_bytes()
        if not data:
            raise ValueError(
                f"self-contained mode: image file {path} of image id {first_id[file_name]} is empty (0 bytes); "
                "restore it or build in reference mode"
            )
        target = out / IMAGE_DIR / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        stored[f"{IMAGE_DIR}/{name}"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return stored


def parquet_path(family: str, seed: int, split: str, layout: str = "parquet") -> str:
    """Path of a split's row file relative to the folder, in ``layout``."""
    if layout == "imagefolder":
        return f"data/{family}-seed{seed}-{split}.parquet"
    return f"data/{family}/seed{seed}/{split}.parquet"


def config_name(family: str, seed: int) -> str:
    """Config name of a family and seed: ``<family>`` for seed 0, else ``<family>_seed<k>``."""
    return family if seed == 0 else f"{family}_seed{seed}"


def config_description(build: FamilyBuild, seed: int, info: Mapping[str, Any]) -> str:
    """The ``DatasetInfo.description`` of one config: family, predicate, seed, splits (and what is left out)."""
    text = (
        f"Counterfactual pairing cycles, family {build.name} ({family_provenance(build.source, build.name)}), "
        f"seed {seed}, built from {info['source']}. Each row is a 2x2 block in Winoground's columns: "
        f"(image_0, caption_0) and (image_1, caption_1) hold, the swaps are false beyond doubt. "
        f"Predicate: {build.predicate} Splits: {', '.join(build.available_splits)}."
    )
    short = [s for s in SPLITS if s not in build.available_splits]
    if short:
        text += (
            f" UNAVAILABLE split(s) {', '.join(short)}: {build.reason}; written but left out of this config, "
            "see unavailable_splits in the card."
        )
    return text


def card_fields(card: SourceCard, builds: Sequence[FamilyBuild], info: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping of the card's YAML header: metadata, ``configs`` (every available split's file),
    ``dataset_info`` (each config's description and citation) and ``unavailable_splits`` when any."""
    layout = layout_of(info)
    configs: list[dict[str, Any]] = []
    infos: list[dict[str, Any]] = []
    unavailable: list[dict[str, Any]] = []
    citation = Quoted(f"{card.citation}\n\n{PAPER_CITATION}")
    for build in builds:
        if not build.records:  # no split meets the minimum-cycle rule: nothing written
            continue
        for seed in sorted(build.counts):
            name = config_name(build.name, seed)
            splits = [s for s in SPLITS if s in build.available_splits]
            config: dict[str, Any] = {"config_name": name}
            if layout == "imagefolder":
                config["metadata_filenames"] = [parquet_path(build.name, seed, s, layout).rsplit("/", 1)[1] for s in splits]
            config["data_files"] = [
                {"split": s, "path": path if layout == "parquet" else [path, f"{IMAGE_DIR}/**"]}
                for s in splits
                for path in [parquet_path(build.name, seed, s, layout)]
            ]
            configs.append(config)
            description = Quoted(config_description(build, seed, info))
            infos.append({"config_name": name, "description": description, "citation": citation})
            unavailable += [
                {
                    "config_name": name,
                    "split": split,
                    "path": parquet_path(build.name, seed, split, layout),
                    "cycles": build.counts[seed][split],
                    "reason": Quoted(build.reason or ""),
                }
                for split in SPLITS
                if split not in splits
            ]
    fields: dict[str, Any] = {
        "license": card.license,
        "pretty_name": card.title,
        "task_categories": ["zero-shot-classification"],
        "tags": ["clip", "compositionality", "counterfactual-cycles", "winoground"],
        "configs": configs,
        "dataset_info": infos,
    }
    if unavailable:
        fields["unavailable_splits"] = unavailable
    return fields


#: The card's thresholds table: (name, flag and default, what it does).
THRESHOLDS: tuple[tuple[str, str, str], ...] = (
    (
        "spatial margin",
        "`clip-cycles build coco --margin` (default 0.1)",
        "relation and position captions: box centres must differ by at least margin x width (left/right) or "
        "margin x height (above/below), for every instance pair; COCO only (GQA relations are annotated edges)",
    ),
    (
        "size ratio",
        "`clip-cycles build coco --size-ratio` (default 1.5)",
        "'larger than' / 'smaller than': one box's area at least ratio x the other's, for every instance pair",
    ),
    (
        "minimum cycles",
        "`--min-cycles` of `clip-cycles build` and of the experiments (default 20)",
        "a split with fewer cycles in some seed is not available: zero-shot scoring needs the split it scores, "
        "probe experiments need train, validation and test",
    ),
    (
        "tie tolerance",
        "`tie_tolerance` in the task YAML (default 1e-9)",
        "|Delta| <= tie tolerance scores one half; one fixed absolute value for every block, model and run",
    ),
    (
        "validation fraction",
        "`clip-cycles build coco|gqa --validation-fraction` (COCO 0.2, GQA 1/7)",
        "share of the train pool that goes to validation per seed (image-disjoint from train)",
    ),
)


def source_placeholder(source: str) -> str:
    """What the card writes for the raw root: ``<coco root>`` (the absolute path stays in build_info.json)."""
    return f"<{source} root>"


def portable_command(info: Mapping[str, Any]) -> str:
    """The rebuild command without machine paths: the raw root as a placeholder, ``--out`` as the folder name."""
    words = shlex.split(str(info["rebuild_command"]))
    replace = {"--coco-root": source_placeholder("coco"), "--gqa-root": source_placeholder("gqa"),
               "--out": info.get("folder_name", "<out>")}  # fmt: skip
    for k in range(len(words) - 1):
        if words[k] in replace:
            words[k + 1] = str(replace[words[k]])
    return shlex.join(words)


@functools.lru_cache(maxsize=1)
def _card_templates() -> Any:
    """The card's layout (Markdown, rendered without autoescaping; every value is computed by :func:`render_card`).

    Made on first use: readers of a built folder (every evaluation) import this module and never render a card.
    """
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("clip_cycles.data.folder", "card_templates"),
        autoescape=False,  # Markdown, not HTML: the card's text is written as computed
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_card(info: Mapping[str, Any], builds: Sequence[FamilyBuild], card: SourceCard) -> str:
    """The dataset card: YAML configs, predicates, provenance, gates and identities, counts, exclusions,
    thresholds, skips, licence, citation, rebuild (laid out by ``card_templates/card.md.j2``)."""
    written = [b for b in builds if b.records]
    thresholds = dict(info.get("thresholds", {}))
    used = {"spatial margin": thresholds.get("margin"), "size ratio": thresholds.get("size_ratio"),
            "minimum cycles": info["min_cycles"], "validation fraction": info["validation_fraction"]}  # fmt: skip
    context = {
        "header": card_header(card_fields(card, builds, info)),
        "title": card.title,
        "source": info["source"],
        "root": source_placeholder(info["source"]),
        "mode": info["mode"],
        "image_dir": IMAGE_DIR,
        "folder_name": info.get("folder_name", "path/to/this/folder"),
        "example": written[0].name if written else "<family>",
        "seeds": [str(s) for s in sorted({s for b in written for s in b.counts})],
        "families": [_card_family(build) for build in builds],
        "skipped": sorted(info.get("skipped", {}).items()),
        "thresholds": [
            (name, "-" if used.get(name) is None else str(used.get(name)), flag, meaning) for name, flag, meaning in THRESHOLDS
        ],
        "train_pool": info["pools"]["train"],
        "val_pool": info["pools"]["val"],
        "validation_fraction": info["validation_fraction"],
        "min_cycles": info["min_cycles"],
        "rebuild": portable_command(info),
        "folder_label": info.get("folder_name", "<this folder>"),
        "license_text": card.license_text,
        "citation": card.citation,
        "paper_citation": PAPER_CITATION,
    }
    return _card_templates().get_template("card.md.j2").render(**context)


def _card_family(build: FamilyBuild) -> dict[str, Any]:
    """One family's section of the card: provenance, predicate, availability, per-seed counts and audits, exclusions."""
    rows = []
    if build.records:
        for seed in sorted(build.counts):
            for split in SPLITS:
                report = build.audits.get(seed, {}).get(split)
                gates = "-" if report is None else f"{report['matched_violations']} / {report['swap_violations']}"
                identities = (
                    "-"
                    if report is None
                    else f"{report['image_tv']:g} / {report['caption_tv']:g} / "
                    + ("balanced" if report["balanced"] else "UNBALANCED")
                )
                rows.append({"seed": seed, "split": split, "cycles": build.counts[seed][split], "gates": gates,
                             "identities": identities})  # fmt: skip
    splits = ", ".join(build.available_splits)
    return {
        "name": build.name,
        "provenance": family_provenance(build.source, build.name),
        "predicate": build.predicate,
        "unavailable_reason": None if build.available else str(build.reason),
        "usable": f" Available splits (zero-shot scoring): {splits}." if build.records else "",
        "rows": rows,
        "excluded": sorted(build.excluded.items()),
    }


# --- folder ownership and transactions -------------------------------------------------------------------

_OWN_TOP = ("README.md", "build_info.json")
_OWN_PARQUET = re.compile(
    r"^data/(?:(?P<family>[^/]+)/seed\d+/|(?P<flat>[^/]+)-seed\d+-)(train|validation|test)\.parquet$"
)  # parquet layout, imagefolder layout


def _relative_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def _own_files(folder: Path) -> set[str]:
    """Files of ``folder`` that a previous build wrote: the card, build_info.json and its Parquet files."""
    info_path = folder / "build_info.json"
    try:
        info = load_json_text(read_regular_file(info_path, MAX_BUILD_INFO_BYTES, "build_info.json"), str(info_path))
    except (OSError, ValueError):
        return set()
    if not isinstance(info, dict) or not isinstance(info.get("families"), dict) or "source" not in info:
        return set()  # a build_info.json that is not ours
    own = {name for name in _OWN_TOP if (folder / name).is_file()}
    files = info.get("files")
    listed = set(files) if isinstance(files, dict) else None
    images = info.get("images")
    stored = set(images) if isinstance(images, dict) else set()
    for name in _relative_files(folder):
        if (_OWN_PARQUET.match(name) and (listed is None or name in listed)) or name in stored:
            own.add(name)
    return own


def foreign_files(folder: str | Path) -> list[str]:
    """Files under ``folder`` (relative paths) that no clip_cycles build wrote."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    own = _own_files(folder)
    return [name for name in _relative_files(folder) if name not in own]


def _check_out(out: Path, overwrite: bool) -> list[str]:
    """Refuse an ``out`` that is a file, or holds foreign files without ``overwrite``; returns the foreign files."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose another --out")
    foreign = foreign_files(out)
    if foreign and not overwrite:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ValueError(
            f"--out {out} holds files clip_cycles did not write ({shown}); choose an empty or new folder, or pass "
            "--overwrite to replace only the card, build_info.json and data/<family>/seed<k>/<split>.parquet"
        )
    return foreign


def _commit(staging: Path, out: Path, foreign: Sequence[str]) -> None:
    """Move a checked staging folder into place; only the project's own files of ``out`` are replaced."""
    if not out.exists() or not foreign:
        # Everything in ``out`` is ours (or there is none): swap whole folders, then drop the old one.
        replace_folder(staging, out)
        return
    # Foreign files stay (--overwrite): remove our old files, move the new ones in, card and info last.
    try:
        for name in sorted(_own_files(out)):
            (out / name).unlink()
        new = _relative_files(staging)
        for name in sorted(new, key=lambda n: (n in _OWN_TOP, n)):
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, target)
    except OSError as error:
        # Past the first removal the folder is no longer as it was: say so, never "left as it was".
        hint = (
            f"{out} holds files the build did not write (--overwrite), so its own files are replaced one by one and "
            "that stopped midway: the folder is incomplete (its card and build_info.json are the last files written); "
            "free space or fix the permissions and rerun the same build"
        )
        named = output_error(error, out, hint)
        raise (named if named is not error else OutputError(f"{error} while writing {out}; {hint}")) from error
    for directory in sorted((p for p in (out / "data").rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            directory.rmdir()  # only empty ones: folders of families no longer built
    shutil.rmtree(staging, ignore_errors=True)


def _file_records(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    import pyarrow.parquet as pq

    records = {}
    for name in sorted(names):
        path = folder / name
        records[name] = {"rows": int(pq.ParquetFile(path).metadata.num_rows), "sha256": _sha256(path)}
    return records


def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def write_folder(
    out: str | Path,
    index: Any,
    builds: Sequence[FamilyBuild],
    config: BuildConfig,
    *,
    rebuild_command: str,
    pools: Mapping[str, int],
    skipped: Mapping[str, int] | None = None,
    extra_info: Mapping[str, Any] | None = None,
) -> Path:
    """Write Parquet files, ``build_info.json`` and the card for built families, as one transaction; returns ``out``.

    Everything goes to a temporary sibling folder, is verified, and then replaces the
    previous build; on any failure ``out`` is left as it was. ``out`` holding files no
    build wrote is refused unless ``config.overwrite`` (then only the project's own files
    are replaced); a build in which no family has an available split is refused unless
    ``config.allow_empty``. ``config`` also gives the mode, ``min_cycles`` and
    ``validation_fraction`` recorded in ``build_info.json``.
    """
    from tqdm.auto import tqdm

    given = Path(out)
    out = set_target(given)  # a symlinked --out: its target is rebuilt, the link stays
    root = Path(index.root)
    # A family short in some split still serves the splits that meet the rule (zero-shot scoring).
    if not any(b.available or b.available_splits for b in builds) and not config.allow_empty:
        reasons = "; ".join(f"{b.name}: {b.reason}" for b in builds) or "no family was requested"
        raise ValueError(
            f"no family has an available split, nothing was written to {out} ({reasons}); lower --min-cycles, "
            "use a larger pool, or pass --allow-empty to write the folder anyway"
        )
    recover_sets(out)  # a build killed while moving its files into a mount point is finished first
    foreign = _check_out(out, config.overwrite)
    staging = staging_folder(out)
    try:
        # The name the folder has once in place, not a staging name with a process id (same build, same bytes).
        _write_into(staging, staged_name(given), root, index, builds, config, rebuild_command, pools, skipped, extra_info, tqdm)
        info = read_build_info(staging)
        problems = verify_folder_files(staging, info)
        if problems:
            raise ValueError(f"the folder written for {out} does not verify: {'; '.join(problems)}")
        _commit(staging, out, foreign)
    except OSError as error:
        raise output_error(error, out, f"free space on that disk or choose another --out; {given} was left as it was") from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return given


def _write_into(
    out: Path,
    folder_name: str,
    root: Path,
    index: Any,
    builds: Sequence[FamilyBuild],
    config: BuildConfig,
    rebuild_command: str,
    pools: Mapping[str, int],
    skipped: Mapping[str, int] | None,
    extra_info: Mapping[str, Any] | None,
    tqdm: Any,
) -> None:
    mode = config.mode
    written = []
    layout = LAYOUT_OF_MODE[mode]
    for build in tqdm(builds, desc="writing parquet", disable=progress_disable()):
        if build.records and not any(key[0] == mode for key in build.encoded):
            encode_family(build, mode)  # a build that did not come through build_folder
        for seed, splits in sorted(build.records.items()):
            for split in SPLITS:
                name = parquet_path(build.name, seed, split, layout)
                write_parquet(out / name, splits[split], mode, root, encoded=build.encoded[mode, name])
                written.append(name)
    images = store_images(out, root, builds) if layout == "imagefolder" else None
    info: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "source": index.source,
        "source_root": str(root.resolve()),
        "mode": mode,
        "layout": layout,
        "folder_name": folder_name,
        # What the folder points into (reference) or was made from (self-contained), checked before scoring.
        "source_fingerprint": build_source_fingerprint(index.source, root),
        "families": {
            b.name: {
                "available": b.available,
                "available_splits": list(b.available_splits),
                "excluded": dict(sorted(b.excluded.items())),
                "provenance": family_provenance(b.source, b.name),
                "predicate": b.predicate,
                "counts": {str(s): c for s, c in sorted(b.counts.items())},
                "audits": {str(s): {sp: _compact(r) for sp, r in a.items()} for s, a in sorted(b.audits.items())},
            }
            for b in builds
        },
        "unavailable": {b.name: b.reason for b in builds if not b.available},
        "skipped": dict(sorted((skipped or {}).items())),
        "pools": dict(pools),
        "min_cycles": config.min_cycles,
        "validation_fraction": config.validation_fraction,
        "rebuild_command": rebuild_command,
        **(extra_info or {}),
        "files": _file_records(out, written),
        **({"images": images} if images is not None else {}),
    }
    write_json(info, out / "build_info.json")
    (out / "README.md").write_text(render_card(info, builds, card_for(index.source, root)), encoding="utf-8")


# --- build_info.json and file verification (shared by evaluation and ``audit``) --------------------------


#: The largest ``build_info.json`` read (a self-contained build lists every stored image: tens of MB).
MAX_BUILD_INFO_BYTES = 1 << 30


def read_build_info(folder: Path) -> dict:
    """Parse ``folder/build_info.json`` and validate its shape; errors name the file and field.

    Raises FileNotFoundError when the file is missing and ValueError for unparsable JSON,
    a top level that is not an object, or a field that does not match the declared
    format (:class:`clip_cycles.schemas.build_info.BuildInfo`: ``source``, ``source_root``,
    ``mode``, ``families`` with ``available`` and ``counts`` per family, ``files`` with
    ``rows`` and ``sha256`` per Parquet file).
    """
    path = Path(folder) / "build_info.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {folder} a folder built by `clip-cycles build`?")
    try:
        info = load_json_text(read_regular_file(path, MAX_BUILD_INFO_BYTES, "build_info.json"), str(path))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text at byte {error.start}; rebuild the folder") from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}; "
            "rebuild the folder with `clip-cycles build`"
        ) from None
    if not isinstance(info, dict):
        raise ValueError(
            f"{path}: top level must be a JSON object, got {type(info).__name__}; rebuild the folder with `clip-cycles build`"
        )

    def bad(field_name: str, what: str) -> ValueError:
        return ValueError(f"{path}: field {field_name!r} {what}; rebuild the folder with `clip-cycles build`")

    # Before the shape check: a newer format may have changed the shape this version declares.
    newer = newer_format_problem(info, path)  # absent format_version: a folder from before the field, this format
    if newer is not None:
        raise ValueError(newer)
    # The shape is declared once (clip_cycles.schemas.build_info), with the keys later builds may add kept.
    _, problem = validate(BuildInfo, info)
    if problem is not None:
        field_name, what = problem
        joined = f" {what}" if what.startswith(("is ", "has ", "lists ")) else f": {what}"
        raise ValueError(f"{path}: field {field_name!r}{joined}; rebuild the folder with `clip-cycles build`")
    # Rules across fields, which the per-field declaration cannot state.
    layout = info.get("layout", "parquet")
    for name in info["files"]:
        match = _OWN_PARQUET.match(str(name))
        if match is None or (match["flat"] is None) != (layout == "parquet"):
            raise bad(f"files.{name}", f"is not a {parquet_path('<family>', 0, '<split>', layout)} path")
    if layout == "imagefolder" and not isinstance(info.get("images"), dict):
        raise bad("images", "is missing or not an object of stored image -> {bytes, sha256} (imagefolder layout)")
    for name in info.get("images") or {}:
        if ".." in PurePosixPath(str(name)).parts:
            raise bad(f"images.{name}", f"is not a path below {IMAGE_DIR}/")
    return info


def expected_files(info: Mapping[str, Any]) -> dict[str, int]:
    """Parquet files the families of ``info`` promise (available families, every seed and split) -> row count."""
    out = {}
    for name, entry in info["families"].items():
        if not entry["available"]:
            continue
        for seed, counts in entry["counts"].items():
            for split in SPLITS:
                out[parquet_path(name, int(seed), split, layout_of(info))] = counts[split]
    return out


def file_family(name: str) -> str:
    """The family of a row file path of either layout (``data/<family>/seed<k>/...`` or ``data/<family>-seed<k>-...``)."""
    match = _OWN_PARQUET.match(name)
    if match is None:
        return name.split("/")[1]
    return match["family"] or match["flat"]


def verify_folder_files(folder: Path, info: dict, *, families: Iterable[str] | None = None) -> list[str]:
    """Check each Parquet file against ``info["files"]`` (rows, sha256) and the family counts.

    Returns one problem string per mismatch, naming the file: missing, unlisted,
    unreadable, a row count different from the record or the card's counts, a digest
    that differs (the file was edited); then each stored image (imagefolder layout) against
    its size and sha256. ``families`` limits the row-file check to those families.
    """
    folder = Path(folder)
    wanted = None if families is None else set(families)

    def included(name: str) -> bool:
        return wanted is None or file_family(name) in wanted

    problems: list[str] = []
    files: Mapping[str, Any] = info.get("files", {})
    promised = expected_files(info)
    for name in sorted(promised):
        if included(name) and name not in files:
            problems.append(f"{folder / name}: promised by families.*.counts but not listed under 'files' in build_info.json")
    for name, record in sorted(files.items()):
        if not included(name):
            continue
        path = folder / name
        if not path.is_file():
            problems.append(f"{path}: listed in build_info.json but missing")
            continue
        # The bytes the build recorded have the rows it counted in them: the file is opened only when they differ.
        same_bytes = _sha256(path) == record["sha256"]
        if same_bytes:
            rows = record["rows"]
        else:
            import pyarrow.parquet as pq  # only for a file that differs: a warm run imports no pyarrow

            try:
                rows = int(pq.ParquetFile(path).metadata.num_rows)
            except Exception as error:  # pyarrow raises several types for a damaged file
                problems.append(f"{path}: not a readable Parquet file ({type(error).__name__}: {error})")
                continue
        if rows != record["rows"]:
            problems.append(f"{path}: {rows} rows but build_info.json records {record['rows']}")
        if name in promised and promised[name] != record["rows"]:
            problems.append(f"{path}: build_info.json records {record['rows']} rows but the family counts say {promised[name]}")
        if not same_bytes:
            problems.append(
                f"{path}: content differs from the sha256 in build_info.json (edited after the build); rebuild the folder"
            )
    # Stored images are shared by every family, so each is checked whatever ``families`` says.
    for name, record in sorted(info.get("images", {}).items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{path}: stored image listed in build_info.json but missing")
        elif path.stat().st_size != record["bytes"] or _sha256(path) != record["sha256"]:
            problems.append(f"{path}: stored image differs from its size and sha256 in build_info.json; rebuild the folder")
    return problems


def fingerprint_cache_dir() -> Path:
    """Where the per-file hashes of source fingerprints are remembered: ``fingerprints/`` of the cache root."""
    return resolve_cache_dir() / "fingerprints"


def build_source_fingerprint(builder: str, root: Path, hash_cache: Path | None = None) -> dict[str, Any]:
    """Fingerprint of the raw root a folder of ``builder`` is made from (the root's own source, e.g. the shapes world).

    Annotation hashes are remembered in ``hash_cache`` when given (a build leaves the cache
    alone by default: it has just read those files anyway).
    """
    source = source_feeding(root, builder)
    kind = source.name if source is not None else builder
    return raw_root_fingerprint(kind, root, hash_cache)


def rebuild_hint(folder: Path, info: Mapping[str, Any]) -> str:
    """The folder's rebuild command, with ``--out`` naming ``folder`` itself (a copy names the copy, not the original)."""
    command = info.get("rebuild_command")
    if not isinstance(command, str) or not command:
        return f"clip-cycles build ... --out {shlex.quote(str(folder))}"
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if "--out" in words[:-1]:
        words[words.index("--out") + 1] = str(folder)
    return shlex.join(words)


def source_problems(
    folder: Path, info: Mapping[str, Any], hash_cache: Path | None = None, current: Mapping[str, Any] | None = None
) -> list[str]:
    """Whether the raw root a reference-mode folder points into is still the one it was built from.

    Returns one problem (empty list: unchanged, or nothing to check). Only reference-mode
    folders are checked: their images are read from ``source_root`` at evaluation, while a
    self-contained folder carries its images (its Parquet digests cover them) and its
    recorded fingerprint is provenance. A folder without ``source_fingerprint`` (built
    before it was recorded) cannot be checked. ``current`` is a fingerprint of the root
    already taken by the caller (the data cache's stamp), so it is not taken twice.
    """
    stored = info.get("source_fingerprint")
    if info.get("mode") != "reference" or not isinstance(stored, dict):
        return []
    root = Path(str(info.get("source_root", "")))
    try:
        cache = hash_cache or fingerprint_cache_dir()
        now = dict(current) if current is not None else raw_root_fingerprint(stored["kind"], root, cache)
    except ValueError as error:  # a source kind this clip_cycles does not register
        return [f"{Path(folder) / 'build_info.json'}: source_fingerprint cannot be checked ({error})"]
    # The root's path is not compared: a raw root moved with its content (source_root edited) is the same source.
    if {k: v for k, v in now.items() if k != "root"} == {k: v for k, v in stored.items() if k != "root"}:
        return []
    return [
        f"the raw root {root} that {folder} points into changed since the build ({fingerprint_changes(stored, now)}), "
        "so its captions no longer describe the images there"
    ]


def _compact(report: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("passed", "matched_violations", "swap_violations", "image_tv", "caption_tv", "balanced")
    return {k: report[k] for k in keys}


def build_folder(
    index: Any,
    families: Sequence[str],
    train_pool: Sequence[int],
    val_pool: Sequence[int],
    out: str | Path,
    config: BuildConfig,
    *,
    rebuild_command: str,
    skipped: Mapping[str, int] | None = None,
    extra_info: Mapping[str, Any] | None = None,
) -> tuple[Path, list[FamilyBuild]]:
    """Build, audit and write the named families of ``index.source`` under ``config``: the one call every source uses.

    Raises :class:`~clip_cycles.data.families.registry.AuditError` when a family split fails an audit;
    families short of ``config.min_cycles`` are recorded as unavailable.
    """
    builds = build_families(index, families, train_pool, val_pool, config, finish=partial(encode_family, mode=config.mode))
    path = write_folder(
        out, index, builds, config, rebuild_command=rebuild_command,
        pools={"train": len(set(train_pool)), "val": len(set(val_pool))}, skipped=skipped, extra_info=extra_info,
    )  # fmt: skip
    return path, builds
