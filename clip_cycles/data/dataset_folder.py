"""Built dataset folders: Parquet per family/split/seed, the dataset card, build_info.json, and ``audit``.

Layout (DEVELOPING.md, "Built dataset folders")::

    <out>/README.md                      card; YAML ``configs:`` names every Parquet file
    <out>/build_info.json                source, families, counts, audits, unavailable, skipped
    <out>/data/<family>/seed<k>/{train,validation,test}.parquet

Config ``<family>`` is seed 0, ``<family>_seed<k>`` seed k, each with splits train,
validation and test, so ``datasets.load_dataset(out, "strict_size", split="test")`` works.
Files are byte-identical for the same inputs and seed: rows in cycle order, fixed
schema and compression, no timestamps.

Builds are transactions: everything is written into a temporary sibling folder, checked
(:func:`verify_folder_files`), and only then moved into place, so a failed build leaves
the previous folder intact. An ``--out`` holding files the project did not write is
refused unless ``overwrite`` is given, and then only the project's own files (card,
``build_info.json``, ``data/<family>/seed<k>/<split>.parquet``) are replaced. A build in
which no family has an available split is refused unless ``allow_empty``.

``build_info.json`` records each Parquet file's row count and sha256 under ``files``;
:func:`read_build_info` validates its shape and :func:`verify_folder_files` the files,
for evaluation and ``audit``.

Two modes: ``reference`` (``image_0``/``image_1`` are file names relative to the source
root) and ``self_contained`` (``datasets.Image`` structs with the image bytes embedded,
ready for ``push_to_hub``; a missing image file is an error naming it).

The card's licence and citation are the raw root's source's (:func:`clip_cycles.data.sources.card_for`):
families the COCO builder makes from the shapes world carry the world's CC0 card.

``clip-cycles audit DIR`` lives in :mod:`clip_cycles.data.folder_audit`: it re-reads the folder
and the raw annotations without the builders' code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from clip_cycles.data.families import (
    ROW_COLUMNS,
    SPLITS,
    FamilyBuild,
    build_families,
    check_seeds,
    family_provenance,
)
from clip_cycles.data.sources import SourceCard, card_for
from clip_cycles.fingerprints import canonical_json
from clip_cycles.results import write_json
from clip_cycles.schemas.build_info import FOLDER_MODES, BuildInfo
from clip_cycles.schemas.declared import validate

MODES: tuple[str, ...] = FOLDER_MODES

PAPER_CITATION = (
    "@inproceedings{cycles2026,\n  title={Can the Parts Fool the Test? Counterfactual Pairing Cycles for "
    "CLIP-like Models},\n  booktitle={NeurIPS},\n  year={2026}\n}"
)


def _features(mode: str) -> dict[str, Any]:
    image = {"_type": "Image"} if mode == "self_contained" else {"_type": "Value", "dtype": "string"}
    string, int64 = {"_type": "Value", "dtype": "string"}, {"_type": "Value", "dtype": "int64"}
    kinds = {"image_0": image, "image_1": image, "seed": int64, "image_id_0": int64, "image_id_1": int64}
    return {name: kinds.get(name, string) for name in ROW_COLUMNS}


def _schema(mode: str) -> Any:
    import pyarrow as pa

    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())]) if mode == "self_contained" else pa.string()
    kinds = {"image_0": image, "image_1": image, "seed": pa.int64(), "image_id_0": pa.int64(), "image_id_1": pa.int64()}
    # Nullable like the schema datasets derives from the features, which it compares field by field.
    fields = [pa.field(name, kinds.get(name, pa.string())) for name in ROW_COLUMNS]
    metadata = {"huggingface": canonical_json({"info": {"features": _features(mode)}})}
    return pa.schema(fields, metadata=metadata)


def _image_value(root: Path, file_name: str, image_id: int, cache: dict[str, bytes]) -> dict[str, Any]:
    if file_name not in cache:
        path = root / file_name
        if not path.is_file():
            raise FileNotFoundError(
                f"self-contained mode: image file {path} of image id {image_id} is missing; restore it or build in reference mode"
            )
        data = path.read_bytes()
        if not data:
            raise ValueError(
                f"self-contained mode: image file {path} of image id {image_id} is empty (0 bytes); "
                "restore it or build in reference mode"
            )
        cache[file_name] = data
    return {"bytes": cache[file_name], "path": file_name}


def write_parquet(path: Path, records: Sequence[Any], mode: str, root: Path) -> None:
    """Write one split's :class:`~clip_cycles.data.families.CycleRecord` rows; same rows give the same bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    rows = [r.as_row() for r in records]
    if mode == "self_contained":
        cache: dict[str, bytes] = {}
        for row in rows:
            row["image_0"] = _image_value(root, row["image_0"], row["image_id_0"], cache)
            row["image_1"] = _image_value(root, row["image_1"], row["image_id_1"], cache)
    table = pa.Table.from_pylist(rows, schema=_schema(mode))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd", compression_level=3, row_group_size=4096)


def parquet_path(family: str, seed: int, split: str) -> str:
    """Path of a Parquet file relative to the folder."""
    return f"data/{family}/seed{seed}/{split}.parquet"


def config_name(family: str, seed: int) -> str:
    """Config name of a family and seed: ``<family>`` for seed 0, else ``<family>_seed<k>``."""
    return family if seed == 0 else f"{family}_seed{seed}"


def _yaml_header(card: SourceCard, builds: Sequence[FamilyBuild]) -> str:
    lines = ["---", f"license: {card.license}", f"pretty_name: {card.title}", "task_categories:",
             "- zero-shot-classification", "tags:", "- clip", "- compositionality", "- counterfactual-cycles",
             "- winoground", "configs:"]  # fmt: skip
    for build in builds:
        if not build.records:  # no split meets the minimum-cycle rule: nothing written
            continue
        for seed in sorted(build.counts):
            lines.append(f"- config_name: {config_name(build.name, seed)}")
            lines.append("  data_files:")
            for split in SPLITS:
                lines += [f"  - split: {split}", f"    path: {parquet_path(build.name, seed, split)}"]
    lines.append("---")
    return "\n".join(lines)


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


def render_card(info: Mapping[str, Any], builds: Sequence[FamilyBuild], card: SourceCard) -> str:
    """The dataset card: YAML configs, predicates, provenance, gates and identities, counts, exclusions,
    thresholds, skips, licence, citation, rebuild."""
    written = [b for b in builds if b.records]
    example = written[0].name if written else "<family>"
    seeds = sorted({s for b in written for s in b.counts})
    out = [_yaml_header(card, builds), "", f"# {card.title}", ""]
    out += [
        "Counterfactual pairing cycles: each row is a complete 2x2 block with Winoground's columns. "
        "(`image_0`, `caption_0`) and (`image_1`, `caption_1`) are valid pairs; the swaps "
        "(`image_0`, `caption_1`) and (`image_1`, `caption_0`) are false beyond doubt under the family predicate "
        "(a named object is absent, or the opposite relation or value holds for every instance). "
        "Score with CycleAcc: s00 + s11 - s01 - s10 > 0.",
        "",
        f"Source: `{info['source']}` at `{info['source_root']}`; mode: `{info['mode']}` "
        + (
            "(image columns are file names relative to the source root)."
            if info["mode"] == "reference"
            else "(images embedded as `datasets.Image`)."
        ),
        "",
        "```python",
        "import datasets",
        f'test = datasets.load_dataset("{info.get("folder_name", "path/to/this/folder")}", "{example}", split="test")',
        f'seed1 = datasets.load_dataset("...", "{example}_seed1", split="validation")  # seeds 1, 2',
        "```",
        "",
        f"Config `<family>` is seed 0; `<family>_seed<k>` is seed k (seeds here: {', '.join(map(str, seeds))}). "
        "Per seed, train and validation are image-disjoint subsets of the train pool; test comes from the val pool.",
        "",
        "Columns: `image_0`, `image_1`, `caption_0`, `caption_1`, `cycle_id`, `family`, `seed`, `split`, "
        "`image_id_0`, `image_id_1`, `predicate` (JSON: the meaning of each caption, the geometry used, and "
        "`stratum`, the candidate stratum both pairs were drawn from).",
        "",
        "## Gates and identities",
        "",
        "Gates (a faulty construction fails them; the build stops): (1) matched validity: both matched captions "
        "are true of their images; (2) swaps false beyond doubt: both swapped captions are false, not merely "
        "unsatisfied (sub-margin geometry, instances that disagree, crowd regions and unannotated scene-graph "
        "edges are undecided and never used); (3) same candidate stratum: both pairs of a cycle come from one "
        "stratum (recorded per row). `clip-cycles audit` re-derives validity from the raw annotations.",
        "",
        "Identities of the block design (recorded, not gates): image and caption total variation between the "
        "matched and swapped sides is 0 and every signed degree is 0 for ANY set of complete 2x2 blocks, so "
        "these columns cannot fail on well-formed cycles. The additive audit run at evaluation trains "
        "image-only, text-only and additive shortcut probes with pair BCE and checks they score exactly 0.5 "
        "CycleAcc; on a design that is not made of cycles it fails and names the Theorem 1 witness.",
        "",
        "## Families",
        "",
        "Provenance: 'paper 1' marks the families the cycles paper names (COCO: coarse object, matched "
        "object, text neighbour, box relation, strict left/right, strict above/below, strict same-pair, strict "
        "size, object variant; GQA: attribute, relation/object, binding, where binding is reported unavailable "
        "and is not one of the paper's 7 available GQA families, which it does not list). Every other family is "
        "this project's addition.",
        "",
    ]
    for build in builds:
        out += [f"### `{build.name}`", "", f"Provenance: {family_provenance(build.source, build.name)}.", "",
                f"Predicate: {build.predicate}", ""]  # fmt: skip
        if not build.available:
            splits = ", ".join(build.available_splits)
            usable = f" Available splits (zero-shot scoring): {splits}." if build.records else ""
            out += [f"**Unavailable for probe experiments**: {build.reason}.{usable}", ""]
        if build.records:
            out += ["| seed | split | cycles | gates: matched / swap violations | identities: image TV / caption TV "
                    "/ balance |", "|---|---|---|---|---|"]  # fmt: skip
            for seed in sorted(build.counts):
                for split in SPLITS:
                    report = build.audits.get(seed, {}).get(split)
                    gates = "-" if report is None else f"{report['matched_violations']} / {report['swap_violations']}"
                    ident = (
                        "-"
                        if report is None
                        else (
                            f"{report['image_tv']:g} / {report['caption_tv']:g} / "
                            + ("balanced" if report["balanced"] else "UNBALANCED")
                        )
                    )
                    out.append(f"| {seed} | {split} | {build.counts[seed][split]} | {gates} | {ident} |")
            out.append("")
        if build.excluded:
            out += ["Candidates excluded by the rule (all seeds and splits; `matched_*`: an image's own caption "
                    "is not true for every instance, counted per image and candidate; `swap_*`: a candidate "
                    "pairing whose swapped caption would not be false beyond doubt, counted per pairing tried):",
                    "", "| reason | count |", "|---|---|"]  # fmt: skip
            out += [f"| {k} | {v} |" for k, v in sorted(build.excluded.items())] + [""]
    skipped = info.get("skipped", {})
    out += ["## Skipped annotations", ""]
    if skipped:
        out += ["| reason | count |", "|---|---|"] + [f"| {k} | {v} |" for k, v in sorted(skipped.items())]
    else:
        out.append("None: every annotation passed validation.")
    thresholds = dict(info.get("thresholds", {}))
    used = {"spatial margin": thresholds.get("margin"), "size ratio": thresholds.get("size_ratio"),
            "minimum cycles": info["min_cycles"], "validation fraction": info["validation_fraction"]}  # fmt: skip
    out += [
        "",
        "## Thresholds",
        "",
        "Every threshold is this project's documented choice (paper 1 does not state its values), with the flag that changes it:",
        "",
        "| threshold | this build | flag (default) | meaning |",
        "|---|---|---|---|",
    ]
    for name, flag, meaning in THRESHOLDS:
        value = used.get(name)
        out.append(f"| {name} | {'-' if value is None else value} | {flag} | {meaning} |")
    out += [
        "",
        "## Pools",
        "",
        f"Train pool: {info['pools']['train']} images; val pool: {info['pools']['val']} images; "
        f"validation fraction {info['validation_fraction']}; minimum cycles per split {info['min_cycles']}.",
        "",
        "## Rebuild",
        "",
        "```bash",
        info["rebuild_command"],
        f"clip-cycles audit {info.get('folder_name', '<this folder>')}",
        "```",
        "",
        "## Licence",
        "",
        card.license_text,
        "",
        "## Citation",
        "",
        "```bibtex",
        card.citation,
        "",
        PAPER_CITATION,
        "```",
        "",
    ]
    return "\n".join(out)


# --- folder ownership and transactions -------------------------------------------------------------------

_OWN_TOP = ("README.md", "build_info.json")
_OWN_PARQUET = re.compile(r"^data/[^/]+/seed\d+/(train|validation|test)\.parquet$")
_DEFAULTS: dict[str, bool] = {"overwrite": False, "allow_empty": False}


@contextlib.contextmanager
def folder_options(overwrite: bool | None = None, allow_empty: bool | None = None) -> Iterator[None]:
    """Defaults of ``overwrite``/``allow_empty`` for builds inside the block (for builders that do not pass them)."""
    saved = dict(_DEFAULTS)
    if overwrite is not None:
        _DEFAULTS["overwrite"] = overwrite
    if allow_empty is not None:
        _DEFAULTS["allow_empty"] = allow_empty
    try:
        yield
    finally:
        _DEFAULTS.update(saved)


def _relative_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def _own_files(folder: Path) -> set[str]:
    """Files of ``folder`` that a previous build wrote: the card, build_info.json and its Parquet files."""
    info_path = folder / "build_info.json"
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(info, dict) or not isinstance(info.get("families"), dict) or "source" not in info:
        return set()  # a build_info.json that is not ours
    own = {name for name in _OWN_TOP if (folder / name).is_file()}
    files = info.get("files")
    listed = set(files) if isinstance(files, dict) else None
    for name in _relative_files(folder):
        if _OWN_PARQUET.match(name) and (listed is None or name in listed):
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


def _staging(out: Path) -> Path:
    staging = out.parent / f".{out.name}.building-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def _commit(staging: Path, out: Path, foreign: Sequence[str]) -> None:
    """Move a checked staging folder into place; only the project's own files of ``out`` are replaced."""
    if not out.exists():
        os.replace(staging, out)
        return
    if not foreign:
        # Everything in ``out`` is ours: swap whole folders, then drop the old one.
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        if old.exists():
            shutil.rmtree(old)
        os.replace(out, old)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
        return
    # Foreign files stay (--overwrite): remove our old files, move the new ones in, card and info last.
    for name in sorted(_own_files(out)):
        (out / name).unlink()
    new = _relative_files(staging)
    for name in sorted(new, key=lambda n: (n in _OWN_TOP, n)):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, target)
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
    *,
    mode: str = "reference",
    rebuild_command: str,
    pools: Mapping[str, int],
    min_cycles: int,
    validation_fraction: float,
    skipped: Mapping[str, int] | None = None,
    extra_info: Mapping[str, Any] | None = None,
    overwrite: bool | None = None,
    allow_empty: bool | None = None,
) -> Path:
    """Write Parquet files, ``build_info.json`` and the card for built families, as one transaction; returns ``out``.

    Everything goes to a temporary sibling folder, is verified, and then replaces the
    previous build; on any failure ``out`` is left as it was. ``out`` holding files no
    build wrote is refused unless ``overwrite`` (then only the project's own files are
    replaced); a build in which no family has an available split is refused unless
    ``allow_empty``.
    """
    from tqdm.auto import tqdm

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    overwrite = _DEFAULTS["overwrite"] if overwrite is None else overwrite
    allow_empty = _DEFAULTS["allow_empty"] if allow_empty is None else allow_empty
    out = Path(out)
    root = Path(index.root)
    # A family short in some split still serves the splits that meet the rule (zero-shot scoring).
    if not any(b.available or b.available_splits for b in builds) and not allow_empty:
        reasons = "; ".join(f"{b.name}: {b.reason}" for b in builds) or "no family was requested"
        raise ValueError(
            f"no family has an available split, nothing was written to {out} ({reasons}); lower --min-cycles, "
            "use a larger pool, or pass --allow-empty to write the folder anyway"
        )
    foreign = _check_out(out, overwrite)
    staging = _staging(out)
    try:
        _write_into(
            staging,
            out.name,
            root,
            index,
            builds,
            mode,
            rebuild_command,
            pools,
            min_cycles,
            validation_fraction,
            skipped,
            extra_info,
            tqdm,
        )
        info = read_build_info(staging)
        problems = verify_folder_files(staging, info)
        if problems:
            raise ValueError(f"the folder written for {out} does not verify: {'; '.join(problems)}")
        _commit(staging, out, foreign)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out


def _write_into(
    out: Path,
    folder_name: str,
    root: Path,
    index: Any,
    builds: Sequence[FamilyBuild],
    mode: str,
    rebuild_command: str,
    pools: Mapping[str, int],
    min_cycles: int,
    validation_fraction: float,
    skipped: Mapping[str, int] | None,
    extra_info: Mapping[str, Any] | None,
    tqdm: Any,
) -> None:
    written = []
    for build in tqdm(builds, desc="writing parquet", disable=None):
        for seed, splits in sorted(build.records.items()):
            for split in SPLITS:
                name = parquet_path(build.name, seed, split)
                write_parquet(out / name, splits[split], mode, root)
                written.append(name)
    info: dict[str, Any] = {
        "source": index.source,
        "source_root": str(root.resolve()),
        "mode": mode,
        "folder_name": folder_name,
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
        "min_cycles": min_cycles,
        "validation_fraction": validation_fraction,
        "rebuild_command": rebuild_command,
        **(extra_info or {}),
        "files": _file_records(out, written),
    }
    write_json(info, out / "build_info.json")
    (out / "README.md").write_text(render_card(info, builds, card_for(index.source, root)), encoding="utf-8")


# --- build_info.json and file verification (shared by evaluation and ``audit``) --------------------------


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
        info = json.loads(path.read_text(encoding="utf-8"))
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
    # The shape is declared once (clip_cycles.schemas.build_info), with the keys later builds may add kept.
    _, problem = validate(BuildInfo, info)
    if problem is not None:
        field_name, what = problem
        joined = f" {what}" if what.startswith(("is ", "has ", "lists ")) else f": {what}"
        raise ValueError(f"{path}: field {field_name!r}{joined}; rebuild the folder with `clip-cycles build`")
    return info


def expected_files(info: Mapping[str, Any]) -> dict[str, int]:
    """Parquet files the families of ``info`` promise (available families, every seed and split) -> row count."""
    out = {}
    for name, entry in info["families"].items():
        if not entry["available"]:
            continue
        for seed, counts in entry["counts"].items():
            for split in SPLITS:
                out[parquet_path(name, int(seed), split)] = counts[split]
    return out


def verify_folder_files(folder: Path, info: dict, *, families: Iterable[str] | None = None) -> list[str]:
    """Check each Parquet file against ``info["files"]`` (rows, sha256) and the family counts.

    Returns one problem string per mismatch, naming the file: missing, unlisted,
    unreadable, a row count different from the record or the card's counts, a digest
    that differs (the file was edited). ``families`` limits the check to those families.
    """
    import pyarrow.parquet as pq

    folder = Path(folder)
    wanted = None if families is None else set(families)

    def included(name: str) -> bool:
        return wanted is None or name.split("/")[1] in wanted

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
        try:
            rows = int(pq.ParquetFile(path).metadata.num_rows)
        except Exception as error:  # pyarrow raises several types for a damaged file
            problems.append(f"{path}: not a readable Parquet file ({type(error).__name__}: {error})")
            continue
        if rows != record["rows"]:
            problems.append(f"{path}: {rows} rows but build_info.json records {record['rows']}")
        if name in promised and promised[name] != record["rows"]:
            problems.append(f"{path}: build_info.json records {record['rows']} rows but the family counts say {promised[name]}")
        if _sha256(path) != record["sha256"]:
            problems.append(
                f"{path}: content differs from the sha256 in build_info.json (edited after the build); rebuild the folder"
            )
    return problems


def _compact(report: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("passed", "matched_violations", "swap_violations", "image_tv", "caption_tv", "balanced")
    return {k: report[k] for k in keys}


def build_folder(
    index: Any,
    families: Sequence[str],
    train_pool: Sequence[int],
    val_pool: Sequence[int],
    out: str | Path,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    min_cycles: int = 20,
    validation_fraction: float = 0.2,
    mode: str = "reference",
    rebuild_command: str,
    skipped: Mapping[str, int] | None = None,
    extra_info: Mapping[str, Any] | None = None,
    overwrite: bool | None = None,
    allow_empty: bool | None = None,
) -> tuple[Path, list[FamilyBuild]]:
    """Build, audit and write the named families of ``index.source``: the one call every source uses.

    Raises :class:`~clip_cycles.data.families.AuditError` when a family split fails an audit;
    families short of ``min_cycles`` are recorded as unavailable.
    """
    if min_cycles < 1:
        raise ValueError(f"min_cycles must be at least 1, got {min_cycles}")
    check_seeds(seeds)
    builds = build_families(index, families, train_pool, val_pool, seeds, min_cycles, validation_fraction)
    path = write_folder(
        out, index, builds, mode=mode, rebuild_command=rebuild_command,
        pools={"train": len(set(train_pool)), "val": len(set(val_pool))}, min_cycles=min_cycles,
        validation_fraction=validation_fraction, skipped=skipped, extra_info=extra_info, overwrite=overwrite,
        allow_empty=allow_empty,
    )  # fmt: skip
    return path, builds
