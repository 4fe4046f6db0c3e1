"""The raw sources (coco, gqa, shapes): one registry that says everything a source is.

A :class:`Source` is registered by name (:func:`register_source`) and holds

- how a raw root of it is recognised (``markers``: any of these files present; a root
  that holds the markers of several sources is the one of highest ``priority``, so the
  shapes world, which carries a COCO layout and GQA scene graphs, is ``shapes``);
- what enters the root's content fingerprint (``annotations``: globs of files taken by
  size, mtime and sha256; ``image_dirs``: folders taken by listing);
- which family builders it feeds (``builders``; ``shapes`` feeds both ``coco`` and
  ``gqa``) and, for a source that is itself a builder, the module registering its
  families (``families_module``) and the builder function (``build_families``);
- the raw-root flag of its ``clip-cycles build <name>`` subcommand (``root_flag``; messages
  name it); the subcommand's options and function are :mod:`clip_cycles.commands.build`'s;
- its dataset-card licence and citation (``card``);
- what a task of the source gets when it is given no root (``default_root``: the
  shapes world is generated into the cache).

Everything else is derived from here: which build subcommands there are
(:mod:`clip_cycles.commands.build`), the card (:mod:`clip_cycles.data.folder.writer`), the
family modules (:mod:`clip_cycles.data.families.registry`), the sources a task's ``dataset_path``
may name (:mod:`clip_cycles.tasks.registry`), and root detection, fingerprints and the
default root (:mod:`clip_cycles.tasks.loading`).

This module sits at the bottom of ``data/`` so every layer can read names, cards and
detection without importing a builder. The behaviour of a source (its family builder,
its default root) is therefore named as ``"module:function"`` (a :data:`Hook`,
as ``clip_cycles.cli`` names its commands) and imported only when used; a source
registered in code may give the callable itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, Union

from clip_cycles.fingerprints import file_fingerprint, listing_fingerprint
from clip_cycles.registry import Registry, resolve_target

#: A function, or where it lives as ``"package.module:function"`` (imported when first used).
Hook = Union[str, Callable[..., Any]]


@dataclass(frozen=True)
class SourceCard:
    """Licence and citation text of a source, for the dataset card."""

    title: str
    license: str
    license_text: str
    citation: str


@dataclass(frozen=True)
class Source:
    """One raw source: recognition, fingerprint, builders, raw-root flag, card and default root."""

    name: str
    #: How messages name the source ("COCO", "shapes world").
    title: str
    #: What a raw root of it holds, in words, for the message listing the roots a task accepts.
    layout: str
    #: Files (relative to the root) any one of which marks a raw root of this source.
    markers: tuple[str, ...]
    #: Globs (relative to the root) of the annotation files that enter the fingerprint by content.
    annotations: tuple[str, ...]
    #: Folders (relative to the root) that enter the fingerprint by listing (size and mtime per file).
    image_dirs: tuple[str, ...]
    #: Family builders a raw root of this source feeds, the first being the one named in messages.
    builders: tuple[str, ...]
    card: SourceCard
    #: The required raw-root flag of the build subcommand (``--coco-root``), as messages name it; None: no raw root.
    root_flag: str | None = None
    #: Module that registers the families of builder ``name`` (a builder source only).
    families_module: str | None = None
    #: ``build_families(raw_root, out, families=..., allow_empty=...) -> (folder, builds)`` (a builder source only).
    build_families: Hook | None = None
    #: ``default_root(cache_dir) -> Path``: the raw root of a task given none; None: such a task is an error.
    default_root: Hook | None = None
    #: Detection order when a root carries the markers of several sources (highest first).
    priority: int = 0

    @property
    def is_builder(self) -> bool:
        """Whether this source is a family builder (registers families and builds folders from roots)."""
        return self.families_module is not None


#: The sources by name, in registration order (detection breaks priority ties by it).
SOURCES: Registry[Source] = Registry("source", ordered=True)


def register_source(source: Source) -> Source:
    """Add ``source`` to the registry; returns it. A name registered twice is an error."""
    if not isinstance(source, Source):
        raise TypeError(f"register_source takes a clip_cycles.data.sources.registry.Source, got {type(source).__name__}")
    if not source.name or "/" in source.name:
        raise ValueError(f"source name {source.name!r} must be a non-empty word without '/'")
    if not source.markers or not source.builders:
        raise ValueError(
            f"source {source.name!r}: markers and builders must not be empty (a root must be "
            "recognisable and feed at least one family builder)"
        )
    if source.is_builder != (source.build_families is not None):
        raise ValueError(
            f"source {source.name!r}: families_module and build_families go together (a family builder "
            "registers families and builds folders from roots)"
        )
    if source.is_builder and source.name not in source.builders:
        raise ValueError(
            f"source {source.name!r} is a family builder, so it must feed itself (builders "
            f"{list(source.builders)} lack {source.name!r})"
        )
    SOURCES.register(source.name, source)
    return source


def unregister_source(name: str) -> Source:
    """Remove ``name`` from the registry (for tests that register a source of their own); returns it."""
    source = get_source(name)
    SOURCES.unregister(source.name)
    return source


def source_names() -> tuple[str, ...]:
    """Registered source names, in registration order."""
    return tuple(SOURCES)


def get_source(name: str) -> Source:
    """The registered source ``name``; a ValueError lists the registered ones."""
    return SOURCES.get(name)


def builder_names() -> tuple[str, ...]:
    """Names of the family builders (sources that register families), in registration order."""
    return tuple(name for name, source in SOURCES.items() if source.is_builder)


def get_builder(name: str) -> Source:
    """The family-builder source ``name``; a ValueError lists the builders."""
    if name not in builder_names():
        raise ValueError(SOURCES.unknown_message(name, names=builder_names(), kind="family builder"))
    return SOURCES.get(name)


def resolve_hook(hook: Hook, owner: str = "") -> Callable[..., Any]:
    """The function a :data:`Hook` names (imported on first use)."""
    if callable(hook):
        return hook
    module_name, _, function = str(hook).partition(":")
    if not module_name or not function:
        raise ValueError(f"{owner or 'hook'} {hook!r} must be a callable or 'package.module:function'")
    try:
        value = resolve_target(str(hook))
    except (AttributeError, ValueError):  # no such attribute, or one that is not a dotted name ("a:b:c")
        value = None
    if not callable(value):
        raise ValueError(f"{owner or 'hook'} {hook!r}: {module_name} has no function {function!r}")
    return value


def detect_source(root: Path) -> str | None:
    """The source whose markers ``root`` holds (highest priority first), or None for no raw root."""
    ordered = sorted(SOURCES.values(), key=lambda s: -s.priority)  # stable: registration order breaks ties
    for source in ordered:
        if any((root / marker).is_file() for marker in source.markers):
            return source.name
    return None


def source_feeding(root: Path, builder: str) -> Source | None:
    """The source of raw root ``root`` when it feeds ``builder``, else None (a root of another source, or none)."""
    detected = detect_source(root)
    if detected is None or builder not in SOURCES.get(detected).builders:
        return None
    return SOURCES.get(detected)


def provenance_label(builder: str, raw_source: str) -> str:
    """How labels and messages name where cycles come from: ``"builder COCO, source shapes world"``.

    The builder is the family code that made the cycles (coco, gqa); the source is the raw data it
    read (COCO annotations, GQA scene graphs, the shapes world), the one a ``cycles/<source>_`` task names.
    """

    def title(name: str) -> str:
        return SOURCES.get(name).title if name in SOURCES else name

    return f"builder {title(builder)}, source {title(raw_source)}"


def card_for(builder: str, root: Path) -> SourceCard:
    """The card of a folder built by ``builder`` from ``root``: the root's own source's card (shapes world: CC0)."""
    return (source_feeding(root, builder) or get_source(builder)).card


#: What a raw-root fingerprint covers (``dataset_folder.source_problems`` and the built-folder cache compare
#: them), and what a source check ignores: the root's path (a root moved with its content is the same source).
RAW_ROOT_KEY_FIELDS: tuple[str, ...] = ("kind", "annotations", "images")
RAW_ROOT_KEY_IGNORES: tuple[str, ...] = ("root",)


def raw_root_fingerprint(kind: str, root: Path, hash_cache: Path | None = None) -> dict[str, Any]:
    """Content fingerprint of a raw root of source ``kind``: its annotation files and its image listing.

    Annotation files (the source's ``annotations`` globs) enter by size, mtime and sha256
    (remembered per file in ``hash_cache``); image folders by their listing with size and
    mtime, without reading the images. Any change gives a different fingerprint.
    """
    source = get_source(kind)
    root = root.resolve()
    annotation_files = sorted({path for pattern in source.annotations for path in root.glob(pattern)})
    annotations = {p.relative_to(root).as_posix(): file_fingerprint(p, hash_cache) for p in annotation_files}
    images = {name: listing_fingerprint(root / name) for name in source.image_dirs if (root / name).is_dir()}
    return {"kind": kind, "root": str(root), "annotations": annotations, "images": images}


def fingerprint_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """What differs between two raw-root fingerprints, in words."""
    if not isinstance(old, dict):
        return "no source fingerprint was stored with the cached build"
    before, after = old.get("annotations", {}), new["annotations"]
    changed = [
        f"{name} {'removed' if name not in after else 'added' if name not in before else 'changed'}"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]
    changed += [
        f"{name}/ listing changed"
        for name in sorted(set(old.get("images", {})) | set(new["images"]))
        if old.get("images", {}).get(name) != new["images"].get(name)
    ]
    return ", ".join(changed) or "the fingerprint format changed"


def build_from_raw(builder: str, raw_root: Path, families: Sequence[str], out: Path, min_cycles: int | None = None) -> Path:
    """Build ``families`` with family builder ``builder`` from ``raw_root`` into ``out``.

    Calls the builder's ``build_families`` (the code behind ``clip-cycles build <builder>``)
    with its defaults; ``min_cycles`` (when given) replaces the default minimum-cycle rule.
    """
    source = get_builder(builder)
    build = resolve_hook(source.build_families, f"source {builder!r} build_families")  # type: ignore[arg-type]
    rule = {} if min_cycles is None else {"min_cycles": min_cycles}
    # allow_empty: an unavailable family is reported per task (its reason), not a failed build.
    folder, _ = build(raw_root, out, families=list(families), allow_empty=True, **rule)
    return Path(folder)


# --- the shipped sources ----------------------------------------------------------------------------------

register_source(
    Source(
        name="coco",
        title="COCO",
        layout="annotations/instances_val2017.json and val2017/",
        markers=("annotations/instances_val2017.json",),
        annotations=("annotations/*.json",),
        image_dirs=("train2017", "val2017"),
        builders=("coco",),
        card=SourceCard(
            title="COCO cycle families",
            license="cc-by-4.0",
            license_text=(
                "COCO annotations are CC BY 4.0 (cocodataset.org/#termsofuse); the images belong to their Flickr "
                "owners under the Flickr terms of use. Reference-mode rows hold only file names, captions and ids."
            ),
            citation=(
                "@inproceedings{lin2014coco,\n  title={Microsoft COCO: Common Objects in Context},\n"
                "  author={Lin, Tsung-Yi and others},\n  booktitle={ECCV},\n  year={2014}\n}"
            ),
        ),
        root_flag="--coco-root",
        families_module="clip_cycles.data.families.coco",
        build_families="clip_cycles.data.folder.build:build_coco_folder",
    )
)

register_source(
    Source(
        name="gqa",
        title="GQA",
        layout="val_sceneGraphs.json",
        markers=("val_sceneGraphs.json", "train_sceneGraphs.json"),
        annotations=("*_sceneGraphs.json",),
        image_dirs=("images",),
        builders=("gqa",),
        card=SourceCard(
            title="GQA cycle families",
            license="cc-by-4.0",
            license_text="GQA scene graphs and questions are CC BY 4.0; images come from Visual Genome (CC BY 4.0).",
            citation=(
                "@inproceedings{hudson2019gqa,\n  title={GQA: A New Dataset for Real-World Visual Reasoning and "
                "Compositional Question Answering},\n  author={Hudson, Drew A. and Manning, Christopher D.},\n"
                "  booktitle={CVPR},\n  year={2019}\n}"
            ),
        ),
        root_flag="--gqa-root",
        families_module="clip_cycles.data.families.gqa",
        build_families="clip_cycles.data.folder.build:build_gqa_folder",
    )
)

register_source(
    Source(
        name="shapes",
        title="shapes world",
        layout="shapes_world.json, made by `clip-cycles build shapes --out <folder>`",
        markers=("shapes_world.json",),
        # The world is both layouts at once: its fingerprint covers every annotation file it writes.
        annotations=("annotations/*.json", "*_sceneGraphs.json", "shapes_world.json"),
        image_dirs=("train2017", "val2017"),
        builders=("coco", "gqa"),
        card=SourceCard(
            title="Shapes-world cycle families",
            license="cc0-1.0",
            license_text="The synthetic shapes world is generated by clip_cycles and dedicated to the public domain (CC0 1.0).",
            citation="Generated by clip_cycles (clip_cycles.data.shapes_world); cite the clip_cycles repository.",
        ),
        default_root="clip_cycles.data.sources.shapes_world:cached_world",
        priority=1,
    )
)
