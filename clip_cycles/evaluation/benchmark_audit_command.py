"""``clip-cycles audit-benchmark NAME --root DIR [model flags]``: audit a benchmark in its own format.

Writes ``<out>/audit_<name>.json`` (clip_benchmark's result shape), ``audit_<name>.md``
(the table, also printed) and ``audit_<name>.png`` (model vs blind baselines per subset).
The model flags are those of ``clip-cycles eval``; without ``--model`` only the design
and the caption-length rules are audited.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.benchmark_audit.adapters import ADAPTERS
from clip_cycles.benchmark_audit.audit import AuditSettings
from clip_cycles.benchmark_audit.report import markdown_table, write_figure
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.encoding.flags import add_model_arguments, model_spec_from_args
from clip_cycles.results import write_json
from clip_cycles.settings import resolve_cache_dir

#: Flags of ``clip-cycles eval`` that an audit does not take (it reads a benchmark root, not tasks).
_NOT_HERE = {"--task", "--dataset-root", "--data-cache-dir"}


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """The model and cache flags exactly as ``clip-cycles eval`` defines them, ``--model`` optional."""

    shared = argparse.ArgumentParser(add_help=False)
    add_model_arguments(shared)
    group = parser.add_argument_group("model (as clip-cycles eval)")
    for action in shared._actions:
        if set(action.option_strings) & _NOT_HERE:
            continue
        if "--model" in action.option_strings:
            action.required = False
            action.help = "model name (backend-specific); omit to audit the design and length rules only"
        group._add_action(action)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help=f"benchmark format: {', '.join(sorted(ADAPTERS))}")
    parser.add_argument("--root", required=True, help="folder (or table file) holding the benchmark's files")
    parser.add_argument("--subset", nargs="+", default=None, help="audit only these subsets")
    parser.add_argument("--out", default=None, help="output folder (default: results/audit_<name>)")
    parser.add_argument("--tie-tolerance", type=float, default=DEFAULT_TIE_TOLERANCE)
    parser.add_argument("--probe-folds", type=int, default=5, help="cross-validation folds (by item) of the probes")
    add_model_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.name not in ADAPTERS:
        raise ValueError(f"unknown benchmark format {args.name!r}; registered: {', '.join(sorted(ADAPTERS))}")
    settings = AuditSettings(tie_tolerance=args.tie_tolerance, probe_folds=args.probe_folds)
    spec = model_spec_from_args(args) if args.model else None
    cache = None if args.no_cache else resolve_cache_dir(args.cache_dir)
    audit = audit_benchmark(args.name, args.root, spec, cache, args.subset, settings, args.batch_size,
                            args.num_workers, args.skip_bad_images)
    out = Path(args.out or os.path.join("results", f"audit_{args.name}"))
    out.mkdir(parents=True, exist_ok=True)
    stem = f"audit_{args.name}"
    table = markdown_table(audit)
    write_json(audit.record(), out / f"{stem}.json")
    (out / f"{stem}.md").write_text(table, encoding="utf-8")
    write_figure(audit, out / f"{stem}.png")
    print(table)
    print(f"wrote {out / (stem + '.json')}, {stem}.md, {stem}.png", file=sys.stderr)
    return 0
