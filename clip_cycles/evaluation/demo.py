"""``clip-cycles demo``: the whole pipeline offline on the embedded default.

1. Generate the shapes world and build its COCO-builder and GQA-builder cycle families
   (seeds 0, 1, 2) into the cache directory, once (``cycles/shapes_all``).
2. Evaluate the shipped cycles-tiny model zero-shot on every family (CycleAcc,
   Winoground text/image/group, the additive audit), through the cached encoder.
3. On the cached features: the probe rank sweep, the family-to-family transfer grid
   and the Cycle OE vs Shortcut OE experiment.
4. Attribute splits on a concept world rendered by the same renderer and embedded with
   cycles-tiny: the five split strategies, F1 selectivity and CS.
5. A benchmark audit: hard negatives made from three families' test cycles, written in
   SugarCrepe's file format (:mod:`clip_cycles.benchmark_audit.shapes_benchmark`), audited
   by ``audit-benchmark``'s code path (blind baselines, the model, the exact cycles found)
   into ``audit_shapes_sugarcrepe.{json,md,png}``; its features are the zero-shot run's, cached.
6. Write ``results/`` (JSON per experiment, ``report.md``, PNG and SVG figures), the
   static results page beside them (``results/page/index.html``, :mod:`clip_cycles.evaluation.page`),
   the figures the documents quote (``docs_figures.json`` and ``docs_figures.md``:
   :func:`docs_figures`, :func:`docs_figures_table`), print a compact table and, last, the page's path.

README.md, the model card (``clip_cycles/encoding/weights/cycles-tiny-shapes.json``) and
``docs/demo_output.md`` quote those figures; ``tests/evaluation/test_docs_figures.py`` regenerates
them from a fresh run of the shipped model and fails when a document disagrees.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Annotated, Any, Sequence

from pydantic import Field

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.attributes.attribute_probes import attribute_task_metrics
from clip_cycles.attributes.concept_features import concept_image_embeddings
from clip_cycles.attributes.shape_concepts import make_shape_concepts
from clip_cycles.attributes.splitters import STRATEGIES, SplitContext
from clip_cycles.benchmark_audit.audit import AuditSettings
from clip_cycles.benchmark_audit.report import write_outputs
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.benchmark_audit.shapes_benchmark import FORMAT, NAME, demo_subset_rows, write_shapes_sugarcrepe
from clip_cycles.data.sources.shapes_world import DEFAULT_WORLD, ShapesWorldOptions, cached_world, world_of
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.encoding.tiny_model import MODEL_NAME, PRETRAINED_TAG, check_shipped_checkpoint
from clip_cycles.evaluation.attribute_runner import attribute_identity
from clip_cycles.evaluation.page import build_page
from clip_cycles.evaluation.result_cache import ResultCache
from clip_cycles.evaluation.zero_shot import evaluate_tasks
from clip_cycles.experiments.experiment_data import load_from_tasks
from clip_cycles.experiments.oe import OESettings, run_oe
from clip_cycles.experiments.probes import ProbeSettings, run_probes
from clip_cycles.experiments.report import build_report
from clip_cycles.experiments.transfer import TransferSettings, run_transfer
from clip_cycles.outputs import drawn_files_cache, write_text_output
from clip_cycles.results import IDENTITY_FIELDS, mean_sd, write_json
from clip_cycles.schemas.options import CheckedOptions
from clip_cycles.settings import resolve_cache_dir, resolve_data_cache_dir
from clip_cycles.tasks.registry import expand_tasks

logger = logging.getLogger(__name__)

#: The demo's shapes world (evaluation data): the project's one default world. cycles-tiny was trained on another seed.
DEMO_WORLD: ShapesWorldOptions = DEFAULT_WORLD
DEMO_SEEDS = (0, 1, 2)
OE_FAMILY = "shapes_object_variant"
COLLECTION = "cycles/shapes_all"
#: The families whose zero-shot CycleAcc README.md and the model card quote.
QUOTED_FAMILIES: tuple[str, ...] = (
    "shapes_coarse_object",
    "shapes_gqa_attribute_color",
    "shapes_strict_left_right",
    "shapes_strict_above_below",
    "shapes_strict_size",
)


class DemoSettings(CheckedOptions):
    """Sizes of the demo's experiments (the full protocols are the `probe`/`transfer`/`oe` commands)."""

    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(DEMO_SEEDS, min_length=1)
    probe_epochs: int = Field(10, ge=1)
    ranks: tuple[Annotated[int, Field(ge=1)], ...] = Field((1, 2, 4, 8, 16, 32, 64), min_length=1)
    transfer_epochs: int = Field(10, ge=1)
    oe_epochs: int = Field(8, ge=1)
    images_per_concept: int = Field(3, ge=1)
    attribute_seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field((0, 1, 2), min_length=1)
    world_images: int = Field(DEMO_WORLD.n_images, ge=1)


QUICK = DemoSettings(
    seeds=(0,), probe_epochs=3, ranks=(1, 8, 64), transfer_epochs=3, oe_epochs=3, images_per_concept=2, attribute_seeds=(0,)
)


def check_writable(path: Path) -> Path:
    """Create ``path`` if needed and prove it is writable, or raise a ValueError that says what to do."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"cache directory {path} is not writable ({error.strerror or error}); "
            "choose another with --cache-dir DIR or the CLIP_CYCLES_CACHE environment variable"
        ) from error
    return path


#: The results page's folder under the demo's ``--out``.
PAGE_FOLDER = "page"


def demo_world(n_images: int = DEMO_WORLD.n_images) -> ShapesWorldOptions:
    """The demo's world with ``n_images`` images (the default: :data:`DEMO_WORLD` itself)."""
    return DEMO_WORLD.replace(n_images=n_images)


def prepare_world(cache: Path, n_images: int = DEMO_WORLD.n_images) -> Path:
    """The demo's shapes world in the cache's ``datasets/`` (generated once); families are built from it on demand.

    With the default size it is the folder a ``cycles/shapes_*`` task given no root uses
    (:func:`~clip_cycles.data.sources.shapes_world.cached_world`), so those routes reuse the demo's builds.
    """
    return cached_world(resolve_data_cache_dir(None, cache), demo_world(n_images))


def demo_context(world: Path, cache: Path, seeds: Sequence[int]) -> RunContext:
    """cycles-tiny with its shipped ``shapes`` weights (open_clip backend, on the CPU) on ``world``, caching in ``cache``."""
    # The shipped checkpoint is checked now; OpenCLIP learns cycles-tiny only when the model is loaded
    # (backends.load_open_clip registers it), so a warm run served from the caches never imports it.
    check_shipped_checkpoint()
    # The CPU even where CUDA is present, so the demo's numbers are the same on every machine.
    options = ModelOptions(model=MODEL_NAME, pretrained=PRETRAINED_TAG, device="cpu", cache_dir=cache, dataset_root=world)
    return RunContext.from_options(options, seeds=seeds)


#: The folder under the cache where the demo keeps the figures it drew (by the records they were drawn from).
DRAWN_FIGURES = "drawn_figures"

#: The demo's per-cycle samples file under ``--out`` (named by the zero-shot record; the page reads its examples there).
SAMPLES_FILE = "zero_shot.samples.jsonl"


def zero_shot(context: RunContext, samples_path: Path | None = None) -> dict[str, Any]:
    """Zero-shot records of every shapes family (``cycles/shapes_all``) as one experiment record.

    The same evaluation as ``clip_benchmark eval --dataset cycles/shapes_all --model cycles-tiny
    --pretrained shapes --dataset_root WORLD``: families are built from the raw world into
    the cache's ``datasets/`` folder once and reused. ``samples_path``: the per-cycle samples
    written there, and named by the record (relative to the record written beside it).
    """
    families: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    spec, seeds = context.spec, context.seeds or ()
    records, _ = evaluate_tasks(
        expand_tasks([COLLECTION]),
        spec,
        context.dataset_root,
        context.cache_dir,
        context.data_cache_dir,
        context.batch_size,
        context.num_workers,  # type: ignore[arg-type]
        context.skip_bad_images,
        context.seeds,
        samples_path,
    )
    for record in records:
        name = record["dataset"].removeprefix("cycles_").removeprefix("cycles/")
        metrics = record["metrics"]
        if metrics.get("available") is False:
            unavailable[name] = str(metrics.get("unavailable_reason") or "unavailable")
            continue
        # Each family names the items it scored (page and report compare only equal item sets).
        families[name] = {**metrics, **{key: record[key] for key in (*IDENTITY_FIELDS, "family") if key in record}}
    world = world_of(Path(str(context.dataset_root))) if context.dataset_root else None
    named = next((r for r in records if "samples" in r), None)
    bound = {key: records[0][key] for key in ("backend", "weights_sha256") if records and key in records[0]}
    if named is not None and samples_path is not None:  # the record sits beside its samples file
        bound["samples"] = {**named["samples"], "path": Path(samples_path).name}
    return {
        **bound,
        "experiment": "zero_shot",
        "model": spec.model,
        "pretrained": spec.pretrained,
        "tie_tolerance": DEFAULT_TIE_TOLERANCE,
        "seeds": list(seeds),
        "world": world.describe() if world is not None else f"data at {context.dataset_root}",
        "families": families,
        "unavailable": dict(sorted(unavailable.items())),
    }


def attribute_splits(run: RunContext, settings: DemoSettings, cache_results: ResultCache | None = None) -> dict[str, Any]:
    """The five split strategies on the rendered shape-concept world, embedded with the run's model.

    ``cache_results``: where the strategies' scores are reused from when the embeddings, labels,
    groups, parameters, seeds and code are the same (None: computed every time).
    """
    spec, cache = run.spec, run.cache_dir
    assert cache is not None  # the demo always caches: its concept world lives there too
    root = cache / "demo" / f"shape_concepts-{settings.images_per_concept}"
    world = make_shape_concepts(root, images_per_concept=settings.images_per_concept)
    concepts, X = concept_image_embeddings(
        world.images,
        spec,
        cache_dir=cache,
        root=root,
        batch_size=run.batch_size,
        num_workers=run.num_workers,
        skip_bad_images=run.skip_bad_images,
    )
    if concepts != world.data.concepts:
        raise ValueError(f"concept embeddings came back for {len(concepts)} of {len(world.data.concepts)} concepts")
    context = SplitContext(
        concepts=world.data.concepts, supercategories=world.data.supercategories, concept_groups=world.concept_groups
    )
    # k-means with k ~ concepts / 7 keeps clusters about the size of a supercategory, as k=100 does on THINGS.
    params = {"clustering": {"n_clusters": max(2, len(world.data.concepts) // 7)}}

    def score_strategies() -> dict[str, Any]:
        strategies: dict[str, Any] = {}
        for name in STRATEGIES:
            runs = [
                attribute_task_metrics(X, world.data, name, seed, context=context, split_params=params.get(name))
                for seed in settings.attribute_seeds
            ]
            strategies[name] = {
                "f1_selectivity": mean_sd([r["f1_selectivity"] for r in runs]),
                "cs": mean_sd([r["cs"] for r in runs]) if all(r["cs"] is not None for r in runs) else None,
                "n_attributes_scored": runs[0]["n_attributes_scored"],
                "per_seed": {str(r["seed"]): {"f1_selectivity": r["f1_selectivity"], "cs": r["cs"]} for r in runs},
            }
        return strategies

    inputs = (X, world.data, world.concept_groups, list(STRATEGIES), params)
    strategies, _ = (cache_results or ResultCache(None)).get_or_compute(
        "demo_attribute_splits", inputs, list(settings.attribute_seeds), score_strategies
    )
    world_facts = {"concepts": len(world.data.concepts), "images_per_concept": settings.images_per_concept}
    return {
        # What was scored, as every record names it (split, items_sha256, source, source_line).
        **attribute_identity(world.data, "shape-concept world", world=world_facts),
        "experiment": "attributes",
        "model": spec.model,
        "pretrained": spec.pretrained,
        "tie_tolerance": DEFAULT_TIE_TOLERANCE,
        "seeds": list(settings.attribute_seeds),
        "world": {
            "concepts": len(world.data.concepts),
            "attributes": list(world.data.attributes),
            "images_per_concept": settings.images_per_concept,
            "supercategory": "shape",
            "concept_groups": len(world.concept_groups),
        },
        "strategies": strategies,
    }


def audit_shapes_benchmark(context: RunContext, out: Path) -> dict[str, Any] | None:
    """Audit the shapes benchmark in SugarCrepe's format as ``clip-cycles audit-benchmark sugarcrepe`` does.

    The benchmark is written under ``<cache>/demo/`` (seed: the run's first) and its audit as
    ``audit_shapes_sugarcrepe.{json,md,png}`` into ``out``, where the report and the page read it.
    Returns the result record, or None when none of its families is available (the reason
    printed, and an earlier run's audit files removed, so the page never shows stale numbers).
    """
    assert context.cache_dir is not None and context.data_cache_dir is not None  # the demo always caches
    seed = (context.seeds or (0,))[0]
    rows, unavailable = demo_subset_rows(Path(str(context.dataset_root)), context.data_cache_dir, seed)
    for subset, reason in sorted(unavailable.items()):
        logger.info("demo: benchmark audit: subset %s left out: %s", subset, reason)
    if not rows:
        for suffix in (".json", ".md", ".png"):
            (out / f"audit_{NAME}{suffix}").unlink(missing_ok=True)
        logger.warning("demo: benchmark audit skipped: none of its families is available in this world")
        return None
    root = context.cache_dir / "demo" / f"{NAME}-{Path(str(context.dataset_root)).name}-seed{seed}"
    write_shapes_sugarcrepe(root, rows, unavailable, seed)
    audit = audit_benchmark(
        FORMAT,
        root,
        context.spec,
        context.cache_dir,
        None,
        AuditSettings(),
        context.batch_size,
        context.num_workers,  # type: ignore[arg-type]
        context.skip_bad_images,
    )
    stats = audit.encode_stats or {}
    logger.info(
        "demo: benchmark audit: %s of %s images and %s of %s captions from the feature cache",
        stats.get("cached_images"),
        stats.get("unique_images"),
        stats.get("cached_captions"),
        stats.get("unique_captions"),
    )
    # Named for what it is, so the page never shows it as the real SugarCrepe; the metrics are the command's.
    # Only the counts that do not depend on what the cache held are kept: a rerun writes the same bytes.
    kept = {
        k: stats[k] for k in ("unique_images", "unique_image_contents", "unique_captions", "skipped_bad_images", "bad_images")
    }
    audit = dataclasses.replace(audit, benchmark=NAME, encode_stats=kept)
    path, _ = write_outputs(audit, out)
    logger.info("demo: benchmark audit of %s written to %s", root, path)
    return audit.record()


def audit_summary(record: dict[str, Any]) -> str:
    """The benchmark-audit lines of the printed table: the whole benchmark, then each subset."""
    m = record["metrics"]
    lines = [
        f"benchmark audit {record['dataset']} ({FORMAT} format): model {_fmt(m['model_acc'])}, best blind "
        f"{m['best_blind']} {_fmt(m['best_blind_acc'])}; {m['n_cycles']} exact cycles, CycleAcc {_fmt(m['cycle_acc'])}"
    ]
    for name, sub in sorted(m["subsets"].items()):
        cycles = sub["cycles"]
        paired = sub.get("best_blind_vs_model")
        # "beats" only where the paired interval over items excludes 0 (audit.blind_vs_model).
        flag = (
            f"  <- {paired['verdict']} ({paired['diff']:+.3f} [{paired['ci_low']:+.3f}, {paired['ci_high']:+.3f}])"
            if isinstance(paired, dict)
            else ""
        )
        lines.append(
            f"  {name:<12} model {_fmt(sub['model_acc'])}, best blind {sub['best_blind']} {_fmt(sub['best_blind_acc'])}, "
            f"{cycles['n_cycles']} exact cycles, CycleAcc {_fmt(cycles.get('cycle_acc'))}{flag}"
        )
    return "\n".join(lines)


def _fmt(summary: Any) -> str:
    if isinstance(summary, dict) and summary.get("mean") is not None:
        return f"{summary['mean']:.3f}±{summary['sd']:.3f}"
    if isinstance(summary, (int, float)):
        return f"{summary:.3f}"
    return "n/a"


def summary_table(results: dict[str, dict[str, Any]], benchmark: dict[str, Any] | None = None) -> str:
    """The compact table printed at the end of the demo (``benchmark``: the benchmark audit's record)."""
    zero, probe = results["zero_shot"], results.get("probe", {})
    lines = [f"world: {zero.get('world', 'not recorded')}"]
    lines += [f"{'family':<30} {'zero-shot':>13} {'rank-64 probe':>14} {'additive audit':>15}"]
    for name in sorted(zero["families"]) + sorted(zero["unavailable"]):
        metrics = zero["families"].get(name)
        if metrics is None:
            lines.append(f"{name:<30} {'unavailable':>13}")
            continue
        zs = {"mean": metrics["cycle_acc"], "sd": metrics.get("cycle_acc_sd", 0.0)}
        fam = probe.get("families", {}).get(name, {})
        rank = fam.get("probes", {}).get("low_rank_r64") if fam.get("available") else None
        audit = metrics.get("additive_audit")
        passed = audit.get("passed") if isinstance(audit, dict) else audit
        lines.append(f"{name:<30} {_fmt(zs):>13} {_fmt(rank):>14} {('0.5 exact' if passed else str(passed)):>15}")
    transfer = results.get("transfer")
    if transfer:
        corr = transfer["correlation"]
        lines.append(
            f"transfer: alignment vs transfer Pearson {_fmt(corr['pearson'])}, Spearman {_fmt(corr['spearman'])}"
            f" over {transfer['n_pairs']} ordered pairs"
        )
    oe = results.get("oe", {}).get("families", {}).get(OE_FAMILY)
    if oe and oe.get("available"):
        methods = oe["methods"]
        lines.append("OE (exact test CycleAcc): " + ", ".join(f"{m} {_fmt(v['test_cycle_acc'])}" for m, v in methods.items()))
    attributes = results.get("attributes")
    if attributes:
        lines.append(
            "attribute splits (F1 selectivity / CS): "
            + ", ".join(f"{name} {_fmt(s['f1_selectivity'])} / {_fmt(s['cs'])}" for name, s in attributes["strategies"].items())
        )
    if benchmark is not None:
        lines.append(audit_summary(benchmark))
    return "\n".join(lines)


def docs_figures(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures the documents quote, from the demo's records: zero-shot CycleAcc of :data:`QUOTED_FAMILIES`
    (mean, sd, cycles, audit) and every attribute split's F1 selectivity and CS (mean, sd).

    A quoted family the run could not score (a smaller world) is kept with its ``unavailable_reason``.
    """
    zero = results["zero_shot"]
    figures: dict[str, Any] = {"seeds": zero["seeds"], "zero_shot": {}, "attributes": {}}
    for name in QUOTED_FAMILIES:
        m = zero["families"].get(name)
        if m is None:
            reason = zero.get("unavailable", {}).get(name, "not in this run")
            figures["zero_shot"][name] = {"available": False, "unavailable_reason": reason}
            continue
        audit = m.get("additive_audit")
        figures["zero_shot"][name] = {
            "cycle_acc": m["cycle_acc"],
            "cycle_acc_sd": m["cycle_acc_sd"],
            "cycle_acc_ci": m.get("cycle_acc_ci"),
            "n_cycles": m["n_cycles"],
            "additive_audit_passed": audit.get("passed") if isinstance(audit, dict) else audit,
        }
    for name, entry in results.get("attributes", {}).get("strategies", {}).items():
        figures["attributes"][name] = {"f1_selectivity": entry["f1_selectivity"], "cs": entry["cs"]}
    return figures


def docs_figures_table(figures: dict[str, Any]) -> str:
    """The markdown table README.md quotes: family, CycleAcc mean ± sd, its recorded 95 % interval, cycles."""
    lines = ["| family | CycleAcc | 95 % CI | cycles |", "|---|---|---|---|"]
    for name, f in figures["zero_shot"].items():
        if "cycle_acc" not in f:
            lines.append(f"| {name.removeprefix('shapes_')} | unavailable: {f['unavailable_reason']} | n/a | 0 |")
            continue
        ci = f.get("cycle_acc_ci") or {}
        interval = f"[{ci['low']:.3f}, {ci['high']:.3f}]" if ci else "n/a"
        lines.append(
            f"| {name.removeprefix('shapes_')} | {f['cycle_acc']:.3f} ± {f['cycle_acc_sd']:.3f} | {interval} | {f['n_cycles']} |"
        )
    return "\n".join(lines)


def run_demo(
    out: str | Path = "results", cache_dir: str | Path | None = None, settings: DemoSettings | None = None
) -> dict[str, dict[str, Any]]:
    """Run the demo and return its result records (also written, with the report, under ``out``)."""
    settings = settings or DemoSettings()
    cache = check_writable(resolve_cache_dir(cache_dir))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 1)
        clock = now
        logger.info("demo: %s done in %s s", name, timings[name])

    world = prepare_world(cache, settings.world_images)
    context = demo_context(world, cache, settings.seeds)
    lap("shapes world")
    results: dict[str, dict[str, Any]] = {"zero_shot": zero_shot(context, out / SAMPLES_FILE)}
    lap("family builds and zero-shot evaluation")
    features = load_from_tasks(
        [COLLECTION],
        context.spec,
        context.dataset_root,
        context.cache_dir,
        context.data_cache_dir,
        context.seeds,
        True,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
    )
    # Each experiment keyed by its features' content, its settings and the code: a warm rerun reuses it,
    # and a changed option recomputes only the experiment that reads it.
    reuse = ResultCache(cache)
    probe_settings = ProbeSettings(epochs=settings.probe_epochs, ranks=settings.ranks, seeds=settings.seeds)
    results["probe"], _ = reuse.get_or_compute(
        "run_probes", features, probe_settings, lambda: run_probes(features, probe_settings)
    )
    lap("probe rank sweep")
    transfer_settings = TransferSettings(epochs=settings.transfer_epochs, seeds=settings.seeds)
    results["transfer"], _ = reuse.get_or_compute(
        "run_transfer", features, transfer_settings, lambda: run_transfer(features, transfer_settings)
    )
    lap("transfer grid")
    oe_data = dataclasses.replace(
        features,
        families={k: v for k, v in features.families.items() if k == OE_FAMILY},
        unavailable={k: v for k, v in features.unavailable.items() if k == OE_FAMILY},
    )
    oe_settings = OESettings(epochs=settings.oe_epochs, seeds=settings.seeds)
    results["oe"], _ = reuse.get_or_compute("run_oe", oe_data, oe_settings, lambda: run_oe(oe_data, oe_settings))
    lap("OE experiment")
    results["attributes"] = attribute_splits(context, settings, reuse)
    lap("attribute splits")
    logger.info(
        "demo: reused from the result cache: %s; computed: %s",
        ", ".join(reuse.stats.reused) or "nothing",
        ", ".join(reuse.stats.computed) or "nothing",
    )
    # Figures drawn from the same records by the same code are copied from the cache, not drawn again.
    with drawn_files_cache(cache / DRAWN_FIGURES):
        audit_shapes_benchmark(context, out)  # audit_<name>.json beside the results, read by the report and the page
        lap("benchmark audit")
        for name, record in results.items():
            write_json(record, out / f"{name}.json")
        figures = docs_figures(results)
        write_json(figures, out / "docs_figures.json")
        write_text_output(out / "docs_figures.md", docs_figures_table(figures) + "\n", what="demo output")
        paths = build_report(out)
    lap("report")
    page = build_page([out], out / PAGE_FOLDER)  # from the records and the samples they name: nothing recomputed
    lap("results page")
    logger.info("report: %s (%d figure files); timings (s): %s", paths.markdown, len(paths.figures), json.dumps(timings))
    logger.info("page: %s", page)
    return results
