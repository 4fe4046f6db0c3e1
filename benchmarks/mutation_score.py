"""Mutation score of core modules with mutmut (3.x), outside CI; prints one JSON object.

Each module is mutated in a scratch copy of the repository (the working tree is never
touched) and every mutant runs only the fast test files that match the module, in the
process mutmut forks per mutant. A module argument is a module file name (``contrast`` for
``clip_cycles/algebra/contrast.py``; ``zero_shot``, ``coco_families``, ...), optionally
restricted to some functions (``zero_shot:score_blocks,score_task``; glob patterns allowed;
a method as ``Class.method``; ``name:all`` for the whole module where ``DEFAULT_FUNCTIONS``
restricts it by default) and optionally given its own test files
(``zero_shot=tests/evaluation/test_evaluate.py+tests/algebra/test_contrast.py``; a pytest node id
``file.py::test_name`` picks one test of a file)::

    python benchmarks/mutation_score.py contrast winoground audits zero_shot:score_*
    python benchmarks/mutation_score.py --show-survivors contrast   # diffs on stderr
    python benchmarks/mutation_score.py --rerun-survivors before.json contrast   # after adding tests

Output: ``{module: {mutants, killed, survived, no_tests, timeout, score, survivors},
"total": {...}}``. ``score`` is killed / mutants; a mutant no test reaches
(``no_tests``) or that outlives its CPU limit without failing counts against it. A module that
runs past ``--timeout`` reports the mutants that ran, with ``"partial": true`` and ``not_run``.
Needs ``pip install mutmut`` (3.8.1 or later 3.x: 3.8.0 reads ``item._nodeid``, which pytest 9 removed; not a dependency
of the package, not run in CI).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: The adapter tests that read each published format from hand-written files (no model, no command run).
_FORMAT_READER_TESTS: tuple[str, ...] = (
    "tests/benchmark_audit/test_benchmark_adapters.py::test_hard_negative_formats_floor_and_ceilings",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_block_formats_floor_ceilings_and_declared_cycles",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_valse_pieces_items_cycle_and_dropped_foil",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_valse_all_reads_every_instance_and_valse_needs_the_votes",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_lengths_are_read_as_published_where_spellings_merge",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_malformed_files_are_refused_naming_file_entry_and_field",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_dropped_entries_are_counted_per_reason",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_missing_files_name_what_the_root_must_hold",
    "tests/benchmark_audit/test_benchmark_adapters.py::test_a_fifo_among_the_files_is_refused_not_read",
    "tests/benchmark_audit/test_benchmark_input_formats.py",
    "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_list_of_non_objects_is_a_sentence_naming_file_and_item",
    "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_non_object_after_good_items_is_named_by_its_position",
    "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_crepe_caption_longer_than_the_csv_default_limit_is_read",
    "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_an_mmvp_statement_longer_than_the_csv_default_limit_is_read",
    "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_the_csv_limit_follows_the_file_and_is_never_lowered",
)

#: Module -> its fast matching test files (each mutant runs only these).
DEFAULT_TESTS: dict[str, tuple[str, ...]] = {
    "contrast": ("tests/algebra/test_contrast.py",),
    # The pattern counts and the interval cache helpers are pinned against plain loops in test_warm_fast_paths.py.
    # The image bootstrap, the exact-pattern bounds and the level edges are replayed by plain loops in test_image_bootstrap.py.
    "bootstrap": (
        "tests/algebra/test_bootstrap.py",
        "tests/evaluation/test_warm_fast_paths.py",
        "tests/algebra/test_image_bootstrap.py",
    ),
    "winoground": ("tests/algebra/test_winoground.py",),
    # The interval levels are pinned against dense formulas, scipy's t and a replayed bootstrap there.
    "paired": ("tests/algebra/test_paired.py", "tests/algebra/test_interval_levels.py"),
    # Not test_samples_flag.py / test_page_from_records.py: they run eval or build pages (seconds a mutant).
    "samples": (
        "tests/evaluation/test_samples_credit.py",
        "tests/evaluation/test_samples_reader.py",
        "tests/evaluation/test_samples_result_files.py",
        "tests/evaluation/test_zero_shot_scoring.py",
    ),
    "compare": ("tests/evaluation/test_compare_rules.py",),
    # Not test_paper2_protocol.py: it replays the released pipeline (about a minute a mutant).
    "paper2_protocol": ("tests/attributes/test_paper2_protocol_units.py",),
    # The cache's own tests from test_result_cache.py (a node id each), not its command tests (minutes a mutant).
    "result_cache": (
        "tests/evaluation/test_result_cache_keys.py",
        "tests/evaluation/test_result_cache.py::test_declaration_matches_the_key",
        "tests/evaluation/test_result_cache.py::test_each_key_field_changes_the_key_and_misses",
        "tests/evaluation/test_result_cache.py::test_a_hit_hands_back_the_cold_value_exactly",
        "tests/evaluation/test_result_cache.py::test_no_root_computes_every_time_and_writes_nothing",
        "tests/evaluation/test_result_cache.py::test_a_corrupt_entry_is_refused_with_a_note_and_recomputed",
        "tests/evaluation/test_result_cache.py::test_content_key_tells_dtype_shape_order_and_refuses_unknown_types",
        "tests/evaluation/test_result_cache.py::test_code_version_follows_the_experiment_sources",
    ),
    # Not test_output_policy.py: its fifo, device and kill tests take 5-12 s each, for most mutants of the writers.
    # test_outputs_units.py: the streams, temporaries, sentences, plan and write_outputs' rollback, by hand.
    "outputs": (
        "tests/core/test_output_guards.py",
        "tests/core/test_output_folders.py",
        "tests/core/test_outputs_units.py",
        "tests/core/test_output_rewrites.py",
        "tests/core/test_output_sets_mutants.py",
        "tests/core/test_drawn_files_mutants.py",
    ),
    # Not test_page_from_records.py / test_item_identity.py / test_record_labels.py: they build pages from results.
    "page_data": (
        "tests/evaluation/test_page_numbers.py",
        "tests/evaluation/test_record_identity.py",
        "tests/evaluation/test_page_equals.py",
        "tests/evaluation/test_page_data_fields.py",
        "tests/evaluation/test_page_data_records.py",
    ),
    # The page's numbers and views by hand (acc cells, overall, comparison, board calls, intervals); not
    # test_page_from_records.py / test_page_browser.py (whole sites, Chromium: seconds to minutes a mutant).
    "page": (
        "tests/evaluation/test_page_numbers.py",
        "tests/evaluation/test_page.py",
        "tests/evaluation/test_page_intervals.py",
        "tests/evaluation/test_page_equals.py",
        "tests/evaluation/test_board_calls.py",
        "tests/evaluation/test_compare_rules.py",
        "tests/evaluation/test_page_p1_mutants.py",
        "tests/evaluation/test_page_p2_mutants.py",
        "tests/evaluation/test_page_p3_mutants.py",
    ),
    "ceilings": (
        "tests/benchmark_audit/test_blind_floors.py",
        "tests/benchmark_audit/test_adapter_roles.py",
        "tests/benchmark_audit/test_ceiling_views.py",
    ),
    "multiplicity": ("tests/algebra/test_multiplicity.py",),
    # Not test_interval_coverage.py / test_interval_calibration.py: thousands of worlds (minutes a mutant).
    "coverage": ("tests/algebra/test_coverage_worlds.py",),
    "crossed": ("tests/algebra/test_interval_levels.py", "tests/algebra/test_paired.py", "tests/evaluation/test_board_calls.py"),
    "audits": (
        "tests/algebra/test_audits.py",
        "tests/algebra/test_audit_reports.py",
        "tests/algebra/test_pass_clauses.py",
        "tests/algebra/test_audits_mutants.py",
    ),
    # Not tests/evaluation/test_evaluate.py: it builds the shapes world and encodes it with the tiny model (minutes per mutant).
    "zero_shot": (
        "tests/evaluation/test_zero_shot_mutants.py",
        "tests/evaluation/test_zero_shot_scoring.py",
        "tests/algebra/test_pass_clauses.py",
        "tests/evaluation/test_warm_fast_paths.py",  # the interval cache: served only while its key, checksum and form hold
    ),
    # Not tests/data/folder/test_folder_audit.py: its module fixtures build folders from the shapes world for every mutant.
    "folder_audit": ("tests/data/folder/test_folder_audit_mutants.py",),
    # Not test_coco_families.py / test_gqa_families.py: their world builds and folder round trips (5-35 s) would
    # run for every mutant of the caption semantics, which the files below read by hand on small fixtures.
    "coco_families": (
        "tests/data/families/test_caption_oracles.py",
        "tests/data/families/test_swap_rule.py",
        "tests/data/families/test_coco_predicates.py",
        "tests/data/families/test_coco_families_mutants.py",
    ),
    "gqa_families": (
        "tests/data/families/test_caption_oracles.py",
        "tests/data/families/test_gqa_swap_rule.py",
        "tests/data/families/test_gqa_statements.py",
        "tests/data/families/test_gqa_families_mutants.py",
    ),
    "splitters": (
        "tests/attributes/test_splitters.py",
        "tests/attributes/test_splitter_reference.py",
        "tests/attributes/test_fold_balance.py",
    ),
    # Not test_attribute_probes.py: its world tests fit probes for minutes, per mutant.
    "attribute_probes": ("tests/attributes/test_probe_metrics_reference.py", "tests/attributes/test_attribute_probes_mutants.py"),
    "interaction": ("tests/algebra/test_interaction.py",),
    "fingerprints": (
        "tests/core/test_fingerprints.py",
        "tests/encoding/test_feature_cache.py",
    ),  # test_key_fields: world builds, slow
    "feature_cache": (
        "tests/encoding/test_feature_cache.py",
        "tests/encoding/test_feature_cache_mutants.py",
        "tests/tasks/test_key_fields.py",
    ),
    "sources": (
        "tests/data/sources/test_sources.py",
        "tests/data/sources/test_sources_mutants.py",
    ),  # test_key_fields: a world build per mutant
    "additive_audit": (
        "tests/heads/test_additive_audit_mutants.py",
        "tests/heads/test_additive_audit.py",
        "tests/algebra/test_pass_clauses.py",
    ),
    # Not test_training.py: its planted-task trainings take minutes a mutant; the loop and mutants files cover the core.
    "training": ("tests/heads/test_training_loop.py", "tests/heads/test_training_mutants.py"),
    # Not test_benchmark_audit.py: it runs the features backend through audit_benchmark (over 10 s of CPU per
    # mutant, hours on shared cores); the mutants file audits hand-built designs directly, number by number.
    # test_blind_floors / test_blind_vs_model / test_adapter_roles: the floors, their intervals, the word-frequency
    # rule and the Holm-adjusted blind-vs-model call on hand-built subsets (a second a file).
    "audit": (
        "tests/benchmark_audit/test_benchmark_audit_mutants.py",
        "tests/benchmark_audit/test_blind_floors.py",
        "tests/benchmark_audit/test_blind_vs_model.py",
        "tests/benchmark_audit/test_adapter_roles.py",
    ),
    # Not test_item_identity.py's eval tests (they build the shapes world and run eval): its digest and
    # scored-cycles tests by node id, and the page/report tests that read item sets from hand-made records.
    "item_sets": (
        "tests/experiments/test_item_sets_mutants.py",
        "tests/evaluation/test_item_identity.py::test_the_digest_is_the_documented_sha256",
        "tests/evaluation/test_item_identity.py::test_the_digest_is_stable_and_ignores_what_was_not_scored",
        "tests/evaluation/test_item_identity.py::test_the_digest_changes_with_any_one_input",
        "tests/evaluation/test_item_identity.py::test_scored_cycles_hash_the_bytes_and_skip_cycles_of_images_not_encoded",
        "tests/evaluation/test_page_equals.py",
        "tests/evaluation/test_page_data_records.py",
        "tests/evaluation/test_page_data_fields.py",
        "tests/experiments/test_report_equals.py",
        "tests/evaluation/test_page.py",
    ),
    # The readers' fast tests (a node id each): not the model-features, published-size, combined-table and
    # with-a-model runs of test_benchmark_adapters.py nor the 1e300-box run of the hostile file (2-9 s each, per mutant).
    "adapters": (
        "tests/benchmark_audit/test_adapters_mutants.py",
        "tests/benchmark_audit/test_adapter_roles.py",
        "tests/benchmark_audit/test_winoground_blocks.py",
        "tests/benchmark_audit/test_benchmark_input_formats.py",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_hard_negative_formats_floor_and_ceilings",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_block_formats_floor_ceilings_and_declared_cycles",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_valse_pieces_items_cycle_and_dropped_foil",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_valse_all_reads_every_instance_and_valse_needs_the_votes",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_existing_sugarcrepe_fixture_ceilings",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_lengths_are_read_as_published_where_spellings_merge",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_malformed_files_are_refused_naming_file_entry_and_field",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_dropped_entries_are_counted_per_reason",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_missing_files_name_what_the_root_must_hold",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_audit_benchmark_all_with_name_path_pairs_and_refusals",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_audit_benchmark_all_reports_a_benchmark_with_nothing_to_audit_as_a_row",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_every_new_format_is_registered_lazily_with_its_module",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_a_fifo_among_the_files_is_refused_not_read",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_a_parquet_benchmark_file_is_read_through_the_bounded_reader",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_list_of_non_objects_is_a_sentence_naming_file_and_item",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_non_object_after_good_items_is_named_by_its_position",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_crepe_caption_longer_than_the_csv_default_limit_is_read",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_an_mmvp_statement_longer_than_the_csv_default_limit_is_read",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_the_csv_limit_follows_the_file_and_is_never_lowered",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_box_that_does_not_fit_its_image_is_a_sentence_before_the_crop",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_published_box_crops_exactly_as_pil_does",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_a_truncated_image_under_a_box_is_a_sentence_naming_it",
        "tests/benchmark_audit/test_benchmark_adapters_hostile.py::test_the_published_shapes_still_read_with_their_counts",
    ),
    "input_formats": (
        "tests/benchmark_audit/test_benchmark_input_formats.py",
        "tests/benchmark_audit/test_input_formats_mutants.py",
    ),
    # The `audit-benchmark all` tests of test_benchmark_adapters.py (a node id each; under a second each), not the file's
    # model-feature and published-size tests; the mutants file builds BenchmarkAudit records by hand.
    "combined": (
        "tests/benchmark_audit/test_combined_mutants.py",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_audit_benchmark_all_writes_one_combined_table",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_audit_benchmark_all_with_name_path_pairs_and_refusals",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_audit_benchmark_all_reports_a_benchmark_with_nothing_to_audit_as_a_row",
        "tests/benchmark_audit/test_benchmark_adapters.py::test_audit_benchmark_all_with_a_model_reports_model_and_cycle_acc",
    ),
    # Not test_benchmark_audit_cli.py / test_naturalbench.py / test_vismin.py / test_bivlc.py: they run the CLI or
    # clip_benchmark with a model (20-50 s a test); nor test_benchmark_audit.py (the features backend: about 6 s a
    # mutant on shared cores, against well under one for the mutants file, whose encoder is a stand-in).
    "benchmark_audit/run": (
        "tests/benchmark_audit/test_run_mutants.py",
        "tests/benchmark_audit/test_item_set_digest.py",
        "tests/benchmark_audit/test_unusable_subsets.py",
    ),
    "shapes_benchmark": (
        "tests/benchmark_audit/test_shapes_benchmark.py",
        "tests/benchmark_audit/test_shapes_benchmark_mutants.py",
    ),
    # Not test_benchmark_adapters_hostile.py / test_published_ceilings_check.py: hostile boxes, published sizes (2-12 s a test).
    "design": (
        "tests/benchmark_audit/test_design_mutants.py",
        "tests/benchmark_audit/test_benchmark_audit_mutants.py",
        "tests/benchmark_audit/test_adapter_roles.py",
        "tests/benchmark_audit/test_ceiling_views.py",
        "tests/benchmark_audit/test_benchmark_audit.py",
    ),
    # The table's and the figure's numbers of one benchmark's audit (not report.py of experiments/ or commands/).
    "benchmark_audit/report": (
        "tests/benchmark_audit/test_report_mutants.py",
        "tests/benchmark_audit/test_blind_vs_model.py",
        "tests/benchmark_audit/test_unusable_subsets.py",
    ),
    # The published-benchmark readers: the tests that call load_benchmark on hand-written files, not the eval /
    # clip_benchmark runs (features and a command per mutant) nor the audit-benchmark-all tables (every format).
    **{
        f"benchmark_audit/formats/{name}": (*own, *_FORMAT_READER_TESTS)
        for name, own in {
            "naturalbench": (
                "tests/benchmark_audit/test_naturalbench.py::test_naturalbench_rows_are_cycles_and_odd_rows_are_counted",
                "tests/benchmark_audit/test_naturalbench.py::test_naturalbench_retrieval_metadata",
                "tests/benchmark_audit/test_naturalbench.py::test_naturalbench_refusals_name_the_file_and_field",
                "tests/benchmark_audit/test_naturalbench_mutants.py",
            ),
            "vismin": (
                "tests/benchmark_audit/test_vismin.py::test_vismin_refusals_name_file_and_field",
                "tests/benchmark_audit/test_vismin_mutants.py",
            ),
            "bivlc": ("tests/benchmark_audit/test_bivlc_mutants.py",),  # not the rows test: it audits the fixture
            "valse": ("tests/benchmark_audit/test_valse_mutants.py",),
            "crepe": ("tests/benchmark_audit/test_crepe_mutants.py",),
            "vl_checklist": ("tests/benchmark_audit/test_vl_checklist_mutants.py",),
            "colorswap": ("tests/benchmark_audit/test_colorswap_mutants.py",),
            "mmvp_vlm": ("tests/benchmark_audit/test_mmvp_vlm_mutants.py",),
            "sugarcrepe_pp": ("tests/benchmark_audit/test_sugarcrepe_pp_mutants.py",),
            "cola": ("tests/benchmark_audit/test_adapter_roles.py", "tests/benchmark_audit/test_cola_mutants.py"),
            "eqben": ("tests/benchmark_audit/test_eqben_mutants.py",),
        }.items()
    },
    "vlm_scores": (
        "tests/encoding/test_vlm_scores_mutants.py",
        "tests/tasks/test_key_fields.py",
    ),  # test_vlm_scores.py: a model per mutant
}

#: Module -> the functions mutated when the command line names none (``name:all`` mutates the whole module):
#: the caption semantics of the family modules (their verdicts, and what each family reads off an image),
#: not the pairing, I/O and CLI code around them, which would take hours of mutants.
DEFAULT_FUNCTIONS: dict[str, tuple[str, ...]] = {
    # Not demo_subset_rows: it loads the demo's built family folders (world builds; the demo's tests run it).
    "shapes_benchmark": (
        "hard_negatives",
        "_image_name",
        "sugarcrepe_files",
        "_json_bytes",
        "_holds_exactly",
        "write_shapes_sugarcrepe",
    ),
    # Not _draw_figure / write_figure: matplotlib's drawing (bar widths, colours, sizes), read by eye, seconds a mutant.
    "benchmark_audit/report": (
        "_fmt",
        "best_blind_cell",
        "blind_vs_model_cell",
        "markdown_table",
        "unusable_rows",
        "weights_label",
        "figure_bytes",
        "write_outputs",
        "output_files",
    ),
    "coco_families": (
        "_centre",
        "relation_truths",
        "_combine",
        "_single_pair_verdicts",
        "_relation_verdicts",
        "relation_verdict",
        "position_verdict",
        "count_verdict",
        "mentions_verdict",
        "supercategory_verdict",
        "exclusion_reason",
        "_relation_meaning",
        "ImageObjects.*",
        "CocoFamily.verdict",
        "CocoFamily.holds",
        "RelationFamily.verdicts",
    ),
    "gqa_families": (
        "attribute_values",
        "_single_value",
        "_has_named_relation",
        "attribute_verdict",
        "relation_verdict",
        "_matched_exclusion",
        "_relation_holds",
        "AttributeFamily.statements",
        "AttributeFamily.verdict",
        "AttributeFamily.holds",
        "_RelationArgumentFamily.compatible",
        "_RelationArgumentFamily.holds",
        "_RelationArgumentFamily.verdict",
        "RelationObject.statements",
        "RelationSubject.statements",
        "RelationSpatial.statements",
        "RelationSpatial.holds",
        "RelationSpatial.verdict",
        "Binding.verdict",
        "Binding.statements",
        "Binding.holds",
    ),
    # Fold assignment (the per-attribute best-fold search, the shared greedy deal by concept count), the
    # label-vector check and the degenerate-fold counts. Not the group rules (similarity, clustering,
    # supercategory, grouping), RandomSplit, the base class or attribute_folds: each of their mutants reruns
    # the k-means world tests of test_splitters.py (80 s a mutant on 2 shared cores, hours in all).
    "splitters": (
        "_check_label_vector",
        "_BalancedStratifiedGroupKFold._find_best_fold",
        "_grouped_folds",
        "CoverageReport.*",
        "coverage_report",
        "leakage_folds",
    ),
    # The benchmark audit's numbers (design, witness, blind and model scores, the word-frequency floor, the floors'
    # intervals, blind vs model and its Holm adjustment, cycles, per tag, summary, pooled ceilings); not
    # probe_values, whose every mutant refits scikit-learn's probes (the replay test pins its values), nor the
    # settings' argument checks.
    "audit": (
        "blind_vs_model",
        "adjust_blind_vs_model",
        "word_frequency_scores",
        "accuracy_intervals",
        "_mean",
        "pooled_ceilings",
        "additive_values",
        "global_degrees",
        "degree_witness",
        "model_values",
        "_cycle_metrics",
        "audit_subset",
        "_per_tag",
        "summarize",
    ),
    # The metrics and the probe's objective (not the L-BFGS-B workspace loop, which the lockstep-vs-sklearn
    # test pins, nor the JSON assembly of attribute_task_metrics).
    "attribute_probes": (
        "f1_selectivity",
        "pearson",
        "f1_scores",
        "supercategory_dominance",
        "AttributeProbeResult.summary",
        "_balanced_weights",
        "_loss_gradient",
        "leakage_score",
        "probe_attributes",
    ),
    # The loop and what its numbers depend on: config checks, the seeded batch order, Adam, the rows a batch
    # reads, selection, the record (not train_on_cycles/train_on_pairs and their validator/table wiring: each
    # of their mutants reruns the planted-task trainings, hours on a shared machine; test_training_mutants.py
    # pins that wiring).
    "training": (
        "TrainConfig.*",
        "Validation.*",
        "fit",
        "TorchAdamW.*",
        "NumpyAdam.*",
        "fit_head",
        "loss_of_kind",
        "cycle_batch_loss",
        "pair_batch_loss",
        "validate_pairs",
        "TrainResult.to_dict",
    ),
    # The folder audit's verdicts: caption readers, truth rules, strata, row checks and ``ok`` (not the raw-file
    # and build_info readers, the file-integrity digest loop, the folder walk and the CLI: I/O and messages).
    "folder_audit": (
        "_noun_forms",
        "read_coco_caption",
        "_gqa_noun",
        "read_gqa_attribute_phrase",
        "render_gqa_noun",
        "_centre",
        "box_relation_holds",
        "_all_or_none",
        "coco_truth",
        "_named",
        "_values",
        "gqa_attribute_truth",
        "_edge",
        "gqa_relation_truth",
        "_conjunction",
        "read_caption",
        "_sub",
        "_strata",
        "_audit_rows",
        "AuditResult.ok",
        "Image.present",
    ),
    # The designs, the AUROC, the probe fits, the balance check and both ``passed`` verdicts (not to_dict's JSON).
    "additive_audit": (
        "Comparisons.*",
        "comparisons",
        "_validate_pairs",
        "pair_auroc",
        "average_ranks",
        "fit_additive_probe",
        "ProbeAudit.passed",
        "AdditiveAuditReport.passed",
        "unbalanced_comparisons",
        "additive_audit",
    ),
    # The scores, their summary over seeds, the audit's inputs and its cache (not the samples file, evaluate's
    # orchestration of encoding, or the record helpers, whose fields tests/schemas/test_schemas.py pins).
    "zero_shot": (
        "per_cycle_scores",
        "score_blocks",
        "score_task",
        "_score_seeds",
        "_task_audits",
        "_task_metrics",
        "_finished_metrics",
        "_compact",
        "_audit_inputs",
        "_audit",
        "task_intervals",
        "_cached_record_path",
        "_cached_record",
        "_write_cached_record",
        "_audit_jobs",
    ),
    # Prompt settings, model identity, the pair key and cache description, counts, scoring and blocks (not
    # HFVLMScorer/load_hf_vlm, which need a transformers model, nor score_tasks' torchrun sharding and the tqdm edge).
    "vlm_scores": (
        "PromptConfig.*",
        "prompt_config_*",
        "_folder_files",
        "_fingerprint_files",
        "model_fingerprint",
        "pair_key",
        "cache_description",
        "PairScoreStats.*",
        "PairScores.*",
        "score_pairs",
        "_score_missing",
        "cycle_pairs",
    ),
}

#: Helper files every test run needs besides the matching test files.
TEST_HELPERS: tuple[str, ...] = tuple(
    sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "tests").rglob("*.py")
        if not p.name.startswith("test_") and "__pycache__" not in p.parts
    )
)  # conftest.py files and tests/support/ (tiny_models.py, record_vocabulary.py, ...): what the test files import

#: Repository folders the tests read besides the package (copied to the scratch copy and mutmut's mutants/).
SCRATCH_EXTRAS: tuple[str, ...] = ("tasks", "hf_datasets")

#: mutmut's exit codes per status (mutmut/__main__.py ``status_by_exit_code``).
KILLED = {1, 3, 37, -11}  # -11: the tests crashed the process (SIGSEGV), which a user would notice too
NO_TESTS = {33}
TIMEOUT = {36, 24, -24, 152, 255}

#: mutmut's command line; not ``python -m mutmut``, under which the trampolines import a second copy of it.
MUTMUT: tuple[str, ...] = (sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())")


def parse_module(spec: str) -> tuple[str, list[str], tuple[str, ...]]:
    """``name[:f1,f2][=t1+t2]`` -> (module name, function globs, test files)."""
    spec, _, tests = spec.partition("=")
    spec, _, functions = spec.partition(":")
    name = Path(spec).stem if spec.endswith(".py") else spec
    module_file(name)  # exits naming the module when there is none
    test_files = tuple(tests.split("+")) if tests else DEFAULT_TESTS.get(name, (f"tests/test_{name}.py",))
    for test in test_files:
        if not (REPO / test.partition("::")[0]).is_file():
            raise SystemExit(f"mutation_score: test file {test} of module {name} does not exist")
    if functions == "all":
        return name, [], test_files
    return name, [f for f in functions.split(",") if f] or list(DEFAULT_FUNCTIONS.get(name, ())), test_files


#: Names kept from before data/ had rooms (and names a file name alone no longer picks out) -> the module's path.
MODULE_ALIASES: dict[str, str] = {
    "coco_families": "data/families/coco",
    "gqa_families": "data/families/gqa",
    "folder_audit": "data/folder/audit",
    "sources": "data/sources/registry",
    "audit": "benchmark_audit/audit",
    "compare": "evaluation/compare",  # not commands/compare.py (the CLI)
    "page": "evaluation/page",  # not commands/page.py (the CLI)
    "samples": "evaluation/samples",  # not schemas/samples.py (the declared line)
}


def module_file(name: str) -> str:
    """``clip_cycles/<room>/<name>.py`` of a module file name (or of a path under clip_cycles/, ``data/folder/audit``,
    or a name of :data:`MODULE_ALIASES`); exits when none or several match."""
    path = MODULE_ALIASES.get(name, name).replace(".", "/")
    if "/" in path:
        found = [f"clip_cycles/{path}.py"] if (REPO / "clip_cycles" / f"{path}.py").is_file() else []
    else:
        found = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "clip_cycles").rglob(f"{path}.py"))
    if len(found) != 1:
        raise SystemExit(f"mutation_score: {len(found)} modules named {name}.py under clip_cycles/: {found}")
    return found[0]


def _mutant_glob(name: str, function: str) -> str:
    """mutmut's name pattern of one function's mutants: ``x_<function>``, or ``xǁ<Class>ǁ<method>`` for
    ``Class.method`` (``Class.*`` for all of a class's methods)."""
    owner, dot, method = function.partition(".")
    mangled = f"x\u01c1{owner}\u01c1{method}" if dot else f"x_{function}"
    return module_file(name).removesuffix(".py").replace("/", ".") + f".{mangled}__mutmut_*"


#: mutmut's CPU limit per mutant is ``(its tests' traced seconds + constant) x multiplier x 2``: generous by
#: default; ``--timeout-multiplier 2 --timeout-constant 30`` stops a mutant that loops forever after about a
#: minute and a half instead of 40 (what this round's out-of-tree watchdog did at 150 CPU s).
DEFAULT_TIMEOUT_MULTIPLIER, DEFAULT_TIMEOUT_CONSTANT = 20.0, 60.0


def _config(
    name: str,
    test_files: tuple[str, ...],
    multiplier: float = DEFAULT_TIMEOUT_MULTIPLIER,
    constant: float = DEFAULT_TIMEOUT_CONSTANT,
) -> str:
    lines = ["[mutmut]", "source_paths = clip_cycles/", f"only_mutate = {module_file(name)}",
             "pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in test_files]  # fmt: skip
    # Generous timeouts: a surviving mutant runs every matching test, and a killed-by-timeout verdict
    # (SIGTERM, "suspicious") would hide whether the tests noticed it.
    lines += (
        [
            "pytest_add_cli_args = -p no:cacheprovider",
            "use_git_change_detection = false",
            f"timeout_multiplier = {multiplier!r}",
            f"timeout_constant = {constant!r}",
            # numba's parallel thread pool does not survive fork (workers get SIGTERM): fork each mutant
            # from a server that has only collected the tests, never run a kernel.
            "process_isolation = forkserver",
            # Tests that load a builder script (hf_datasets/*/build.py) read it next to the tests.
            "also_copy =",
        ]
        # Only the extras this layout has (the task YAMLs now ship inside clip_cycles/, copied with it).
        + [f"    {extra}/" for extra in SCRATCH_EXTRAS if (REPO / extra).is_dir()]
        + [""]
    )
    return "\n".join(lines) + _pytest_section()


def _pytest_section() -> str:
    """The repository's ``[tool:pytest]`` section (pythonpath = tests/support, ...), which the scratch
    setup.cfg must repeat: the test files import their helpers from tests/support/."""
    text = (REPO / "setup.cfg").read_text(encoding="utf-8")
    start = text.find("[tool:pytest]")
    if start < 0:
        return ""
    end = text.find("\n[", start + 1)
    return "\n" + (text[start:] if end < 0 else text[start : end + 1])


def run_module(
    name: str,
    functions: list[str],
    test_files: tuple[str, ...],
    timeout: float,
    show: bool,
    max_children: int = 2,
    previous: dict[str, Any] | None = None,
    cpu_limit: tuple[float, float] = (DEFAULT_TIMEOUT_MULTIPLIER, DEFAULT_TIMEOUT_CONSTANT),
) -> dict[str, Any]:
    """Mutate one module in a scratch copy and count the mutants by status.

    With ``previous`` (this module's entry of an earlier run on the same source), only its
    survivors run again; the mutants it killed stay killed.
    """
    scratch = Path(tempfile.mkdtemp(prefix=f"mutmut_{name.replace('/', '_')}_"))  # a path form names no folder
    try:
        shutil.copytree(REPO / "clip_cycles", scratch / "clip_cycles", ignore=shutil.ignore_patterns("__pycache__"))
        (scratch / "tests").mkdir()
        for test in sorted({t.partition("::")[0] for t in (*TEST_HELPERS, *test_files)}):  # a node id: its file
            (scratch / test).parent.mkdir(parents=True, exist_ok=True)  # tests/<room>/ since tests mirror the package
            shutil.copy(REPO / test, scratch / test)
        for extra in SCRATCH_EXTRAS:
            if (REPO / extra).is_dir():
                shutil.copytree(REPO / extra, scratch / extra)
        (scratch / "setup.cfg").write_text(_config(name, test_files, *cpu_limit), encoding="utf-8")
        env = {**os.environ, "CLIP_CYCLES_NO_PLUGIN": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        # The unmutated tests must pass first: else mutmut only says "failed to collect stats" (e.g. a
        # Python without torch, or a test file that needs a helper not copied here).
        check = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *test_files],
                               cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if check.returncode != 0:
            raise SystemExit(
                f"mutation_score: the tests of {name} ({' '.join(test_files)}) fail before any mutation, under "
                f"{sys.executable}; run this script with the project's Python (mutmut installed there):\n"
                f"{check.stdout[-2000:]}\n{check.stderr[-1000:]}"
            )
        globs = [_mutant_glob(name, f) for f in functions]
        if previous is not None:
            globs = list(previous["survivors"])
        command = [*MUTMUT, "run", "--max-children", str(max_children), *globs]
        try:
            proc = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
            output, timed_out = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}", False
        except subprocess.TimeoutExpired as expired:  # keep what ran: mutmut saves each verdict as it comes
            output, timed_out = f"{_text(expired.stdout)[-3000:]}\n{_text(expired.stderr)[-3000:]}", True
        meta = scratch / "mutants" / f"{module_file(name)}.meta"
        if not meta.is_file():
            raise SystemExit(f"mutation_score: mutmut produced no results for {name} (timed out: {timed_out}):\n{output}")
        codes: dict[str, Any] = json.loads(meta.read_text())["exit_code_by_key"]
        if globs:
            codes = {k: v for k, v in codes.items() if k in globs or any(fnmatch.fnmatch(k, g) for g in globs)}
        killed = sorted(k for k, v in codes.items() if v in KILLED)
        no_tests = sorted(k for k, v in codes.items() if v in NO_TESTS)
        timeout_ = sorted(k for k, v in codes.items() if v in TIMEOUT)
        not_run = sorted(k for k, v in codes.items() if v is None)
        if not_run and not timed_out:
            raise SystemExit(f"mutation_score: mutmut left {len(not_run)} mutants of {name} unrun:\n{output}")
        if len(not_run) == len(codes):
            raise SystemExit(f"mutation_score: --timeout {timeout:g} s passed before any mutant of {name} ran:\n{output}")
        # A timed-out module reports the mutants that ran (``partial``, ``not_run``); its score is over those only.
        codes = {k: v for k, v in codes.items() if v is not None}
        # Everything else (exit 0, or a signal such as SIGTERM from mutmut's own timeout) is a survivor.
        survived = sorted(k for k in codes if k not in killed and k not in no_tests and k not in timeout_)
        if show:
            for mutant in survived + no_tests:
                diff = subprocess.run([*MUTMUT, "show", mutant], cwd=scratch, env=env,
                                      capture_output=True, text=True)  # fmt: skip
                print(f"### {mutant}\n{diff.stdout}", file=sys.stderr)
        total = len(codes)
        if previous is not None:  # the earlier run's kills plus this run's
            total = previous["mutants"]
            killed = killed + ["(killed before)"] * previous["killed"]
        return {
            "mutants": total,
            "killed": len(killed),
            "survived": len(survived),
            "no_tests": len(no_tests),
            "timeout": len(timeout_),
            "score": round(len(killed) / total, 4) if total else None,  # over the mutants that ran
            "survivors": survived + no_tests + timeout_,
            "tests": list(test_files),
            "functions": functions or "all",
            **({"partial": True, "not_run": len(not_run)} if timed_out else {}),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: How to put the null device back (as root) when a mutant replaced it; the suite's stream tests fail until then.
RESTORE_DEVNULL = "restore it as root: rm /dev/null && mknod -m 666 /dev/null c 1 3"


def _null_device_intact() -> bool:
    """Whether the null device is still a character device: a mutant of the output writers (a stream taken
    for a regular file) renames a file over it when a test writes to it, which breaks every later run."""
    try:
        return stat.S_ISCHR(os.stat(os.devnull).st_mode)
    except OSError:
        return False


def _text(data: bytes | str | None) -> str:
    """A timed-out child's captured output as text."""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="+", help="name[:functions][=tests], e.g. contrast or zero_shot:score_*")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per module (default 1800)")
    parser.add_argument("--show-survivors", action="store_true", help="print each survivor's diff on stderr")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run in parallel (default 2)")
    parser.add_argument(
        "--rerun-survivors",
        type=Path,
        default=None,
        help="JSON of an earlier run on unchanged sources: run only its survivors again",
    )
    parser.add_argument("--timeout-multiplier", type=float, default=DEFAULT_TIMEOUT_MULTIPLIER,
                        help="mutmut's CPU limit per mutant is (tests' seconds + constant) x multiplier x 2")  # fmt: skip
    parser.add_argument("--timeout-constant", type=float, default=DEFAULT_TIMEOUT_CONSTANT,
                        help="seconds added to a mutant's traced test time before the multiplier")  # fmt: skip
    args = parser.parse_args(argv)
    if args.timeout_multiplier <= 0 or args.timeout_constant < 0:
        parser.error("--timeout-multiplier must be positive and --timeout-constant not negative")
    if not _null_device_intact():
        parser.error(f"{os.devnull} is not a character device (a mutant replaced it in an earlier run); {RESTORE_DEVNULL}")
    results: dict[str, Any] = {}
    earlier = json.loads(args.rerun_survivors.read_text()) if args.rerun_survivors else {}
    # A module that failed in the earlier run (no survivors listed) runs in full.
    earlier = {k: v for k, v in earlier.items() if isinstance(v, dict) and "survivors" in v}
    for spec in args.modules:
        name, functions, tests = parse_module(spec)
        key = name if not functions else f"{name}:{','.join(functions)}"
        try:
            results[key] = run_module(name, functions, tests, args.timeout, args.show_survivors, args.max_children,
                                      earlier.get(key), (args.timeout_multiplier, args.timeout_constant))  # fmt: skip
        except SystemExit as error:  # one module's failure is reported, the others still run
            results[key] = {"error": str(error)[-2000:], "mutants": 0, "killed": 0}
        if not _null_device_intact():  # the writers' mutants can rename a file over it (outputs' stream tests)
            message = f"{os.devnull} was replaced by a regular file while mutating {key}; {RESTORE_DEVNULL}"
            print(f"mutation_score: {message}", file=sys.stderr)
            results[key]["warning"] = message
            break
    mutants = sum(r["mutants"] for r in results.values())
    killed = sum(r["killed"] for r in results.values())
    results["total"] = {"mutants": mutants, "killed": killed, "survived": mutants - killed,
                        "score": round(killed / mutants, 4) if mutants else None}  # fmt: skip
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
