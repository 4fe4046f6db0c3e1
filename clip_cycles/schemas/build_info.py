"""``build_info.json`` of a built dataset folder, declared (DEVELOPING.md "Built dataset folders").

Writers add keys over time (a format version, a fingerprint of the source), so every
level keeps keys it does not declare; what it declares is checked: the source, its
root and the folder mode, each family's availability and per-seed split counts, and
each Parquet file's row count and sha256.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints

from clip_cycles.schemas.declared import Open

#: Folder modes: images by path into the source root, or the images stored in the folder.
FOLDER_MODES: tuple[str, ...] = ("reference", "self_contained")
#: How rows and images are stored: one Parquet file per family, seed and split (``parquet``), or
#: flat row files beside the images stored once (``imagefolder``, self-contained builds).
FOLDER_LAYOUTS: tuple[str, ...] = ("parquet", "imagefolder")
#: Version of the folder format written into ``build_info.json`` (``format_version``). A folder
#: without the field is read as this version (folders built before the field existed);
#: a higher number was written by a newer clip_cycles and is refused.
FORMAT_VERSION: int = 1
SEED_KEY = r"^[0-9]+$"


def newer_format_problem(info: Any, path: Any) -> str | None:
    """The one sentence every reader of a built folder (``audit``, ``eval``, the clip_benchmark plugin,
    ``page``, ``load_split``) gives for a ``build_info.json`` of a newer format, else None."""
    version = info.get("format_version", FORMAT_VERSION) if isinstance(info, dict) else FORMAT_VERSION
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        return (
            f"{path}: folder format version {version} was written by a newer clip_cycles; this clip_cycles reads "
            f"format version {FORMAT_VERSION} and older. Upgrade clip_cycles, or rebuild the folder with this one"
        )
    return None


# Either layout's row files; which one a folder may use follows its ``layout`` (checked by read_build_info).
PARQUET_PATH = r"^data/([^/]+/seed[0-9]+/|[^/]+-seed[0-9]+-)(train|validation|test)\.parquet$"
# A stored image: below data/images/, no backslashes (no ".." step: checked by read_build_info).
IMAGE_PATH = r"^data/images/[^\\]+$"
SHA256 = r"^[0-9a-f]{64}$"
Count = Annotated[int, Field(ge=0)]


class SplitCounts(Open):
    """Cycles per split of one seed."""

    train: Count = Field(description="a non-negative integer (cycles in train)")
    validation: Count = Field(description="a non-negative integer (cycles in validation)")
    test: Count = Field(description="a non-negative integer (cycles in test)")


class FamilyEntry(Open):
    """One family of the folder (other keys: available_splits, excluded, provenance, predicate, audits)."""

    available: bool = Field(description="true or false: whether the family was built")
    counts: dict[Annotated[str, StringConstraints(pattern=SEED_KEY)], SplitCounts] = Field(
        description="an object of seed -> {train, validation, test} counts",
        json_schema_extra={"propertyNames": {"pattern": SEED_KEY}},
    )


class FileRecord(Open):
    """What the build recorded of one Parquet file."""

    rows: Count = Field(description="a non-negative integer (rows of the file)")
    sha256: Annotated[str, StringConstraints(pattern=SHA256)] = Field(description="a sha256 hex digest (64 lowercase hex digits)")


class StoredImage(Open):
    """What the build recorded of one stored image (imagefolder layout)."""

    bytes: Count = Field(description="a non-negative integer (bytes of the image file)")
    sha256: Annotated[str, StringConstraints(pattern=SHA256)] = Field(description="a sha256 hex digest (64 lowercase hex digits)")


class SourceFingerprint(Open):
    """The raw root a folder points into or was made from, at build time (checked before scoring)."""

    kind: str = Field(description="a string: the source kind")
    annotations: dict[str, Any] = Field(description="an object of annotation file -> {size, mtime_ns, sha256}")
    images: dict[str, Any] = Field(description="an object of image folder -> {files, digest}")


def _some_families(families: dict[str, Any]) -> dict[str, Any]:
    if not families:
        raise ValueError("lists no families")
    return families


class BuildInfo(Open):
    """``build_info.json``: what a folder holds and how to check it."""

    format_version: int = Field(
        default=FORMAT_VERSION, ge=1, description=f"a positive integer, at most {FORMAT_VERSION} (the folder format)"
    )
    source: str = Field(min_length=1, description="a non-empty string: the source kind (coco, gqa, shapes, ...)")
    source_root: str = Field(min_length=1, description="a non-empty string: the raw source root the folder was built from")
    mode: Literal[FOLDER_MODES] = Field(description="the folder mode")  # type: ignore[valid-type]
    layout: Literal[FOLDER_LAYOUTS] = Field(default="parquet", description="how rows and images are stored")  # type: ignore[valid-type]
    source_fingerprint: SourceFingerprint | None = Field(
        default=None, description="an object with 'kind', 'annotations' and 'images' (the raw root at build time)"
    )
    families: Annotated[dict[str, FamilyEntry], AfterValidator(_some_families)] = Field(
        description="an object of family name -> entry"
    )
    files: dict[Annotated[str, StringConstraints(pattern=PARQUET_PATH)], FileRecord] = Field(
        description="an object of row file (data/<family>/seed<k>/<split>.parquet, or data/<family>-seed<k>-<split>.parquet "
        "in the imagefolder layout) -> {rows, sha256} (folders built before digests were recorded have none)",
        json_schema_extra={"propertyNames": {"pattern": PARQUET_PATH}},
    )
    images: dict[Annotated[str, StringConstraints(pattern=IMAGE_PATH)], StoredImage] | None = Field(
        default=None,
        description="an object of data/images/<name> -> {bytes, sha256} (imagefolder layout: each image stored once)",
        json_schema_extra={"propertyNames": {"pattern": IMAGE_PATH}},
    )
    unavailable: dict[str, Any] = Field(default_factory=dict, description="an object of family name -> reason")
    skipped: dict[str, Any] = Field(default_factory=dict, description="an object of reason -> count")


def build_info_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``build_info.json``."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "clip_cycles build_info.json",
        **BuildInfo.model_json_schema(),
    }
