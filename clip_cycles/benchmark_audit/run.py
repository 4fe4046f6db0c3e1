"""Audit a whole benchmark for a model: read it, embed it through the feature cache, audit each subset.

Outputs: a result record in clip_benchmark's shape ``{dataset, model, pretrained, task,
metrics, language}`` (``dataset`` is ``audit/<format>``), a markdown table and a figure
(model accuracy vs the blind baselines per subset).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from clip_cycles.benchmark_audit.adapters import ADAPTERS, load_benchmark
from clip_cycles.benchmark_audit.audit import AuditSettings, Embeddings, SubsetAudit, audit_subset, summarize
from clip_cycles.benchmark_audit.design import ComparisonSet, empty_subset
from clip_cycles.encoding.backends import PRECOMPUTED_FEATURES
from clip_cycles.encoding.encoder import encode
from clip_cycles.results import benchmark_record, clean
from clip_cycles.verbosity import progress_disable

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.encoding.encoder import EncodeStats, ModelSpec

#: clip_benchmark's ``task`` field of an audit result.
RESULT_TASK = "benchmark_audit"


@dataclass
class BenchmarkAudit:
    """Every subset's audit of one benchmark, the headline summary and the encoder's counts."""

    benchmark: str
    audits: list[SubsetAudit]
    summary: dict[str, Any]
    settings: AuditSettings
    encode_stats: dict[str, Any] | None = None
    model: dict[str, Any] = field(default_factory=dict)
    #: The subsets read but not audited, by name: ``{n_comparisons: 0, reason, skipped}`` (:func:`unusable_row`).
    unusable: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The item-set digest of what was audited (:func:`items_digest`); None for an audit built by hand.
    items_sha256: str | None = None
    #: The item-set identity of what was audited (:func:`audit_identity`).
    identity: dict[str, Any] | None = None

    def metrics(self) -> dict[str, Any]:
        """The ``metrics`` of the result record: headline numbers first, then per subset."""
        out: dict[str, Any] = {
            **self.summary,
            "tie_tolerance": self.settings.tie_tolerance,
            "probe": {"folds": self.settings.probe_folds, "C": self.settings.probe_c, "folds_by": "item"},
            "averaged_over": {
                "*_acc": "the subset's comparisons (credit 1 / 0.5 tie / 0)",
                "model_item_acc": "items (an item counts its weakest comparison)",
                "cycle_acc": "exact cycles (declared or paired)",
            },
            "subsets": {a.name: a.metrics for a in self.audits},
        }
        if self.unusable:  # only then: an audit of every subset keeps its bytes
            out["unusable_subsets"] = self.unusable
        if self.items_sha256 is not None:
            out["items_sha256"] = self.items_sha256
        if self.encode_stats is not None:
            out["encoding"] = self.encode_stats
        return out

    def record(self, language: str = "en") -> dict[str, Any]:
        """clip_benchmark's result JSON."""
        return benchmark_record(
            f"audit/{self.benchmark}",
            self.model.get("model", ""),
            self.model.get("pretrained"),
            clean(self.metrics()),
            task=RESULT_TASK,
            language=language,
            identity=self.identity,
            model_source={k: self.model[k] for k in ("backend", "weights_sha256") if k in self.model} or None,
        )


#: The split an audit records: a published benchmark is audited whole.
AUDIT_SPLIT = "all"


def audit_identity(name: str, sets: Sequence[ComparisonSet], unusable: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The item set an audit scored: :func:`items_digest` of every subset's comparisons (ids, image keys, captions,
    weights) and of the subsets not audited; the same digest the metrics carry as ``items_sha256``.

    Images enter by key (the benchmark's published file names), captions as read, so another
    file list, caption or comparison gives another digest; the same files read again the same one.
    """
    return {
        "split": AUDIT_SPLIT,
        "items_sha256": items_digest(sets, unusable or {}),
        "source": {"kind": "benchmark", "builder": name, "world": None, "annotations": {}},
        "source_line": f"benchmark {name}: {len(sets)} subsets as published",
    }


def check_images_present(name: str, root: str | Path, subsets: Sequence[ComparisonSet]) -> None:
    """Refuse, before any encoding, an audit with a model whose images are not where the format's layout puts them.

    The sentence names the documented layout (the adapter's ``expects``), the flag that skips missing
    images and the audit that needs none (no ``--model``).
    """
    images = {item.key: item for cs in subsets for item in cs.images}
    missing = [item for item in images.values() if item.data is None and item.path is not None and not item.path.is_file()]
    if missing:
        first = missing[0]
        raise FileNotFoundError(
            f"{name} root {root}: {len(missing)} of {len(images)} images are not there (the first, {first.key!r}, "
            f"was looked for at {first.path}); an audit with a model reads {ADAPTERS.get(name).expects}: put the "
            "images there, pass --skip-bad-images to count and skip the missing ones, or drop --model to audit the "
            "design and length rules only"
        )


def embed_subsets(
    subsets: Sequence[ComparisonSet],
    spec: ModelSpec,
    cache_dir: str | Path | None = None,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
    caption_format: Callable[[str], str] | None = None,
) -> tuple[list[ComparisonSet], list[Embeddings], EncodeStats]:
    """Encode every subset's images and captions in one pass through the feature cache.

    Items with a comparison touching an image that could not be read (``skip_bad_images``)
    are dropped whole; their comparisons are counted in the subset's ``skipped`` as
    ``comparison_of_item_with_bad_image``.
    """
    fmt = caption_format or (lambda text: text)
    images = [item for cs in subsets for item in cs.images]
    captions = [fmt(text) for cs in subsets for text in cs.captions]
    encoded = encode(
        images, captions, spec, cache_dir, batch_size=batch_size, num_workers=num_workers, skip_bad_images=skip_bad_images
    )
    out_sets, out_embeddings = [], []
    dim = encoded.caption_features.shape[1]
    for cs in subsets:
        present = np.array([item.key in encoded.image_rows for item in cs.images], dtype=bool)
        if not present.all():
            bad_edge = ~present[cs.edge_image]
            bad = np.zeros(cs.n_comparisons, dtype=bool)
            bad[cs.edge_comparison[bad_edge]] = True
            # The whole item goes: a Winoground block or an ARO case is scored complete or not at all.
            bad_items = {cs.item_ids[c] for c in np.flatnonzero(bad).tolist()}
            bad = np.array([item in bad_items for item in cs.item_ids], dtype=bool)
            if bad.all():
                # Not an abort: the subset becomes a row saying why (the others are still audited).
                first = next(i.key for i, p in zip(cs.images, present) if not p)
                skipped = {**cs.skipped, "comparison_of_item_with_bad_image": int(bad.sum())}
                reason = f"every item touches an unreadable image (first: {first!r})"
                out_sets.append(empty_subset(cs.name, reason, cs.kind, skipped))
                out_embeddings.append(Embeddings(np.zeros((0, dim)), np.zeros((0, dim))))
                continue
            cs = cs.restrict(~bad, "comparison_of_item_with_bad_image")
        phi = np.zeros((len(cs.images), dim), dtype=np.float64)
        for i, item in enumerate(cs.images):
            row = encoded.image_rows.get(item.key)
            if row is not None:
                phi[i] = encoded.image_features[row]
        psi = encoded.caption_features[[encoded.caption_rows[fmt(text)] for text in cs.captions]].astype(np.float64)
        out_sets.append(cs)
        out_embeddings.append(Embeddings(phi, psi))
    return out_sets, out_embeddings, encoded.stats


def items_digest(sets: Sequence[ComparisonSet], unusable: dict[str, dict[str, Any]]) -> str:
    """sha256 of what an audit read: per subset (by name), each comparison in the order read as
    ``[comparison id, item id, [[image key, caption, weight], ...]]``, and the subsets not audited with their reason.

    Images enter by key (a design-only audit never reads them): two releases of one benchmark that differ in
    one caption, one label (which statement goes with which image, as MMVP's two ground truths) or one item
    give two digests; the same files read again give the same one.
    """
    h = hashlib.sha256()
    for cs in sorted(sets, key=lambda s: s.name):
        h.update(json.dumps(["subset", cs.name, cs.kind]).encode("utf-8") + b"\n")
        edges: list[list[list[Any]]] = [[] for _ in range(cs.n_comparisons)]
        for c, u, v, w in zip(
            cs.edge_comparison.tolist(), cs.edge_image.tolist(), cs.edge_caption.tolist(), cs.edge_weight.tolist()
        ):
            edges[c].append([cs.images[u].key, cs.captions[v], w])
        for comparison, item, found in zip(cs.comparison_ids, cs.item_ids, edges):
            h.update(json.dumps([comparison, item, found], ensure_ascii=False).encode("utf-8") + b"\n")
    h.update(json.dumps(["not audited", sorted(unusable.items())], sort_keys=True).encode("utf-8"))
    return h.hexdigest()


def unusable_row(cs: ComparisonSet) -> dict[str, Any]:
    """The report's row of a subset with no comparison: count 0, the reason, the drops counted."""
    return {"n_comparisons": 0, "reason": cs.unusable or "no comparison", "skipped": dict(sorted(cs.skipped.items()))}


def split_unusable(sets: Sequence[ComparisonSet], *more: Sequence[Any]) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """The subsets with a comparison (and the parallel entries of ``more``), and the rows of the others."""
    keep = [k for k, cs in enumerate(sets) if cs.n_comparisons]
    rows = {cs.name: unusable_row(cs) for cs in sets if not cs.n_comparisons}
    return [[seq[k] for k in keep] for seq in (sets, *more)], rows


def audit_benchmark(
    name: str,
    root: str | Path,
    spec: ModelSpec | None = None,
    cache_dir: str | Path | None = None,
    subsets: Sequence[str] | None = None,
    settings: AuditSettings | None = None,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
    caption_format: Callable[[str], str] | None = None,
) -> BenchmarkAudit:
    """Read benchmark ``name`` at ``root`` and audit every subset; ``spec=None`` audits the design and length rules only."""
    from tqdm import tqdm

    settings = settings or AuditSettings()
    (sets,), unusable = split_unusable(load_benchmark(name, root, subsets))
    embeddings: list[Embeddings | None] = [None] * len(sets)
    stats = None
    model: dict[str, Any] = {}
    if spec is not None and sets:
        # Before the model loads: say where the images go, not only which one is missing (a backend of
        # precomputed features reads no image file).
        if not skip_bad_images and not spec.backend.can(PRECOMPUTED_FEATURES):
            check_images_present(name, root, sets)
        sets, found, encode_stats = embed_subsets(sets, spec, cache_dir, batch_size, num_workers, skip_bad_images, caption_format)
        (sets, embeddings), more = split_unusable(sets, list(found))
        unusable.update(more)
        stats = encode_stats.to_dict()
        # What ran, as every record names it: the backend and the weights' content digest (spec.source()).
        model = {
            "model": spec.model,
            "pretrained": spec.pretrained,
            **spec.source(cache_dir and Path(cache_dir) / "fingerprints"),
        }
    if not sets:
        rows = "; ".join(f"{subset}: {row['reason']}" for subset, row in unusable.items())
        raise ValueError(f"{name} root {root}: no subset has a comparison to audit ({rows})")
    audits = [
        audit_subset(cs, emb, settings)
        for cs, emb in tqdm(list(zip(sets, embeddings)), desc=f"auditing {name}", disable=progress_disable())
    ]
    unusable = dict(sorted(unusable.items()))
    identity = audit_identity(name, sets, unusable)  # one digest: the record's identity and metrics.items_sha256
    return BenchmarkAudit(name, audits, summarize(audits), settings, stats, model, unusable, identity["items_sha256"], identity)
