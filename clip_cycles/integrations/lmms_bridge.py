"""lmms-eval bridge: cycle tasks scored by any lmms-eval model's log-likelihood requests.

``python -m clip_cycles.commands.lmms_bridge --dataset-root <built folder> --task cycles/<name> ...
--out <folder>`` writes an lmms-eval task folder for lmms-eval's external-task mechanism
(``--include_path``): one task per (cycle task, seed) named ``clip_cycles_<family>_seed<k>``
and one group per cycle task, ``clip_cycles_<family>``, whose CycleAcc is the unweighted
mean over seeds like ``clip-cycles eval``. Then::

    lmms-eval --model clip_cycles_hf_vlm --model_args pretrained=<folder or hub id> \\
        --tasks clip_cycles_box_left_right --include_path <folder> --output_path results/

Each cycle becomes two documents, one per image; each asks for the log-likelihood of
both captions after the prompt (lmms-eval's ``multiple_choice`` requests with the
captions as choices). ``process_results`` keeps the two scores with the cycle id and
row, and the aggregations rebuild the (N, 2, 2) blocks to report CycleAcc (float64,
the task's tie tolerance, half ties) and Winoground's text/image/group accuracy through
:mod:`clip_cycles.algebra.contrast` and :mod:`clip_cycles.algebra.winoground`, the same code as the
native path. lmms-eval's ``--limit`` counts documents: an odd limit cuts the last cycle
in half; that cycle is left out, counted in the ``n_incomplete_cycles`` metric and named
in a warning (lmms-eval would swallow an error and exit 0).

Models: ``clip_cycles_hf_vlm`` (this module's :class:`ClipCyclesVLM`, registered through
the ``lmms_eval.models`` entry point) scores exactly like the native ``hf_vlm`` backend,
so both give the same CycleAcc on the same blocks. Any other lmms-eval model works too;
it places the image itself, so the bridge passes it the prompt without ``{image}``.
Several lmms-eval models return the caption's mean *loss* instead of its log-likelihood
(llava_hf does): write their folder with ``--loglikelihood-is-loss`` so the bridge flips
the sign.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml

from clip_cycles.algebra.contrast import cycle_acc, deltas_from_blocks
from clip_cycles.algebra.winoground import winoground_scores
from clip_cycles.data.folder.reader import available_splits, open_built_folder
from clip_cycles.data.sources.images import ImageItem, decode_rgb, open_rgb
from clip_cycles.encoding.backends import no_prompts
from clip_cycles.encoding.vlm_scores import PromptConfig, load_hf_vlm, prompt_config_for_task
from clip_cycles.outputs import write_file_set
from clip_cycles.tasks.names import resolve_task_names
from clip_cycles.tasks.registry import TaskSpec, expand_tasks
from clip_cycles.verbosity import progress_disable

MODEL_ID = "clip_cycles_hf_vlm"
TASK_PREFIX = "clip_cycles_"
METRICS: tuple[str, ...] = ("cycle_acc", "text_acc", "image_acc", "group_acc", "n_cycles", "n_incomplete_cycles")
#: The shipped lmms-eval task template and utils (copied into every written folder).
TEMPLATE_DIR = Path(__file__).with_name("lmms_tasks")


# --------------------------------------------------------------------------- task functions


class TaskFunctions:
    """The functions a written task folder's ``utils.py`` exposes to lmms-eval's YAML ``!function``."""

    def __init__(self, source_root: str | None, tie_tolerance: float, sign: float = 1.0) -> None:
        self.source_root = Path(source_root) if source_root else None
        self.tie_tolerance = float(tie_tolerance)
        self.sign = float(sign)

    def process_docs(self, dataset: Any) -> Any:
        """One document per (cycle, image row): the image and both captions."""

        def explode(batch: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
            out: dict[str, list[Any]] = {"image": [], "row": [], "cycle_id": [], "caption_0": [], "caption_1": []}
            for i, cycle_id in enumerate(batch["cycle_id"]):
                for row in (0, 1):
                    out["image"].append(batch[f"image_{row}"][i])
                    out["row"].append(row)
                    out["cycle_id"].append(cycle_id)
                    out["caption_0"].append(batch["caption_0"][i])
                    out["caption_1"].append(batch["caption_1"][i])
            return out

        return dataset.map(explode, batched=True, remove_columns=dataset.column_names)

    def doc_to_visual(self, doc: Mapping[str, Any], kwargs: Mapping[str, Any] | None = None) -> list[Any]:
        """The document's image as an RGB PIL image (reference-mode file names resolve against the source root).

        Files are read as the encoder reads them (regular files only, bounded) and decoded by
        :func:`clip_cycles.data.sources.images.decode_rgb` (16-bit scaled, transparency over white).
        """
        value = doc["image"]
        label = f"cycle {doc['cycle_id']}: image"
        if isinstance(value, str):
            if self.source_root is None:
                raise ValueError(
                    f"cycle {doc['cycle_id']}: image {value!r} is a file name but the task folder "
                    "names no source root; rewrite it with clip_cycles.integrations.lmms_bridge"
                )
            path = self.source_root / value
            if not path.is_file():
                raise FileNotFoundError(f"cycle {doc['cycle_id']}: image {path} does not exist")
            return [open_rgb(ImageItem(key=value, path=path).read_bytes(), f"{label} {path}")]
        if isinstance(value, dict):
            data = value.get("bytes")
            if data is None:
                data = ImageItem(key=str(value.get("path")), path=Path(str(value.get("path")))).read_bytes()
            return [open_rgb(bytes(data), label)]
        return [decode_rgb(value, label)]

    def doc_to_text(self, doc: Mapping[str, Any], kwargs: Mapping[str, Any] | None = None) -> str:
        """The prompt (lmms_eval_specific_kwargs ``prompt``); the captions follow as the continuation."""
        return str((kwargs or {}).get("prompt", PromptConfig().prompt))

    def doc_to_choice(self, doc: Mapping[str, Any]) -> list[str]:
        return [doc["caption_0"], doc["caption_1"]]

    def doc_to_target(self, doc: Mapping[str, Any]) -> int:
        return int(doc["row"])

    def process_results(self, doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
        """Keep both caption scores of this image row with the cycle id, for every metric."""
        scores = [self.sign * _loglikelihood(r) for r in results]
        if len(scores) != 2:
            raise ValueError(f"cycle {doc['cycle_id']} row {doc['row']}: expected 2 log-likelihoods, got {len(scores)}")
        item = {"cycle_id": doc["cycle_id"], "row": int(doc["row"]), "scores": scores}
        return {name: item for name in METRICS}

    def complete_blocks(self, items: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, list[str]]:
        """(N, 2, 2) float64 blocks of the cycles with both image rows scored (sorted id order), and the other ids.

        lmms-eval's ``--limit`` counts documents, two per cycle: an odd limit leaves the
        last cycle with one image row, which cannot be scored.
        """
        rows: dict[str, dict[int, list[float]]] = defaultdict(dict)
        for item in items:
            rows[item["cycle_id"]][int(item["row"])] = list(item["scores"])
        incomplete = sorted(c for c, r in rows.items() if set(r) != {0, 1})
        ids = sorted(c for c in rows if c not in set(incomplete))
        return np.asarray([[rows[c][0], rows[c][1]] for c in ids], dtype=np.float64).reshape(-1, 2, 2), incomplete

    def blocks(self, items: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The complete cycles' blocks (:meth:`complete_blocks`)."""
        return self.complete_blocks(items)[0]

    def metric(self, name: str, items: Sequence[Mapping[str, Any]]) -> float:
        """One aggregation; cycles missing an image row are left out, counted (``n_incomplete_cycles``) and named.

        lmms-eval catches errors raised by an aggregation and still exits 0, so a cut cycle
        is reported, never raised; with no complete cycle every score is NaN.
        """
        blocks, incomplete = self.complete_blocks(items)
        if name == "n_incomplete_cycles":
            return float(len(incomplete))
        if incomplete and name == "cycle_acc":  # one warning per task, not one per metric
            shown = ", ".join(incomplete[:5]) + (" ..." if len(incomplete) > 5 else "")
            warnings.warn(
                f"clip_cycles: {len(incomplete)} cycle(s) have one of their two documents only ({shown}): "
                f"scored the {blocks.shape[0]} complete cycles and left these out (n_incomplete_cycles); "
                "an lmms-eval --limit must be even, two documents per cycle",
                stacklevel=2,
            )
        if name == "n_cycles":
            return float(blocks.shape[0])
        if blocks.shape[0] == 0:
            return float("nan")
        if name == "cycle_acc":
            return cycle_acc(deltas_from_blocks(blocks), self.tie_tolerance)
        return float(getattr(winoground_scores(blocks), name))


def _loglikelihood(result: Any) -> float:
    """The log-likelihood of one lmms-eval response: ``(ll, is_greedy)``, its string form, or a bare number."""
    if isinstance(result, str):  # some lmms-eval versions hand process_results the repr of the tuple
        try:
            result = ast.literal_eval(result.strip())
        except (ValueError, SyntaxError) as error:
            raise ValueError(f"cannot read a log-likelihood from the model response {result!r}") from error
    if isinstance(result, (tuple, list)):
        result = result[0]
    return float(result)


# --------------------------------------------------------------------------- writing a task folder


UTILS_TEMPLATE = '''"""Generated by clip_cycles.integrations.lmms_bridge for {root}: do not edit, rewrite instead."""

from clip_cycles.integrations.lmms_bridge import TaskFunctions

_functions = TaskFunctions(source_root={source_root!r}, tie_tolerance={tie!r}, sign={sign!r})
process_docs = _functions.process_docs
doc_to_visual = _functions.doc_to_visual
doc_to_text = _functions.doc_to_text
doc_to_choice = _functions.doc_to_choice
doc_to_target = _functions.doc_to_target
process_results = _functions.process_results


def cycle_acc(items):
    return _functions.metric("cycle_acc", items)


def text_acc(items):
    return _functions.metric("text_acc", items)


def image_acc(items):
    return _functions.metric("image_acc", items)


def group_acc(items):
    return _functions.metric("group_acc", items)


def n_cycles(items):
    return _functions.metric("n_cycles", items)


def n_incomplete_cycles(items):
    return _functions.metric("n_incomplete_cycles", items)
'''


def _other_model_prompt(config: PromptConfig) -> str:
    """The prompt for lmms-eval models that place the image themselves: the template without ``{image}``."""
    return " ".join(config.prompt.replace("{image}", " ").split())


def write_lmms_tasks(
    dataset_root: str | Path,
    out: str | Path,
    task_names: Sequence[str],
    seeds: Sequence[int] | None = None,
    loglikelihood_is_loss: bool = False,
) -> list[str]:
    """Write an lmms-eval task folder for cycle tasks on a built dataset folder; returns the task and group names.

    The folder is written to a temporary sibling and moved into place when complete.
    """
    root = Path(dataset_root).expanduser().resolve()
    folder = open_built_folder(root)
    tasks = expand_tasks(resolve_task_names(task_names))  # names, collections, fnmatch patterns
    bad = [t.name for t in tasks if not isinstance(t, TaskSpec) or t.output_type != "cycle_selection" or t.members]
    if bad:
        raise ValueError(f"tasks {bad} are not zero-shot cycle tasks (output_type cycle_selection)")
    tolerances = {t.tie_tolerance for t in tasks}
    if len(tolerances) != 1:
        raise ValueError(
            f"tasks {[t.name for t in tasks]} use different tie tolerances {sorted(tolerances)}; write them into separate folders"
        )
    out = Path(out)
    files: dict[str, bytes] = {}  # written as one transaction at the end (clip_cycles.outputs.write_file_set)
    source_root = str(folder.source_root) if str(folder.source_root) not in ("", ".") else None
    files["utils.py"] = UTILS_TEMPLATE.format(
        root=root, source_root=source_root, tie=tolerances.pop(), sign=-1.0 if loglikelihood_is_loss else 1.0
    ).encode("utf-8")
    files["_default_template_yaml"] = (TEMPLATE_DIR / "_default_template_yaml").read_bytes()
    names: list[str] = []
    for task in tasks:
        family = task.config
        if family not in folder.info.get("families", {}):
            raise ValueError(f"task {task.name}: family {family!r} is not in {root / 'build_info.json'}")
        if task.split not in available_splits(folder.info, family):
            # The card leaves such a split out of its configs, so lmms-eval's load_dataset would not find it.
            reason = folder.info.get("unavailable", {}).get(family, "no reason recorded")
            raise ValueError(
                f"task {task.name}: split {task.split!r} of family {family!r} is unavailable in {root} ({reason}); "
                "rebuild with a lower --min-cycles or score an available split"
            )
        if task.caption_template != "{caption}":
            raise ValueError(
                f"task {task.name}: caption template {task.caption_template!r} is not supported by the "
                "bridge (lmms-eval passes the dataset's captions)"
            )
        config = prompt_config_for_task(task)
        members = []
        for seed in seeds if seeds is not None else task.seeds:
            name = f"{TASK_PREFIX}{family}_seed{seed}"
            body = {
                "include": "_default_template_yaml",
                "task": name,
                "dataset_path": str(root),
                "dataset_name": task.config_name(seed),
                "test_split": task.split,
                "lmms_eval_specific_kwargs": {
                    "default": {"prompt": _other_model_prompt(config)},
                    MODEL_ID: {"prompt": config.prompt},
                },
                "metadata": {"clip_cycles_task": task.name, "seed": int(seed), "score": config.score},
            }
            files[f"{name}.yaml"] = yaml.safe_dump(body, sort_keys=True).encode("utf-8")
            members.append(name)
            names.append(name)
        group = {
            "group": f"{TASK_PREFIX}{family}",
            "task": members,
            "aggregate_metric_list": [{"metric": m, "aggregation": "mean", "weight_by_size": False} for m in METRICS],
        }
        files[f"{TASK_PREFIX}{family}.yaml"] = yaml.safe_dump(group, sort_keys=False).encode("utf-8")
        names.append(group["group"])
    write_file_set(out, files, keep_others=False, what="lmms-eval task folder")
    return names


# --------------------------------------------------------------------------- the lmms-eval model


def _lmms_base() -> type:
    try:
        from lmms_eval.api.model import lmms
    except ImportError as error:  # pragma: no cover - optional extra
        raise ImportError("the lmms-eval bridge needs lmms-eval: pip install clip-cycles[lmms]") from error
    return lmms


def lmms_manifest() -> Any:
    """Entry point ``lmms_eval.models``: registers :class:`ClipCyclesVLM` as ``clip_cycles_hf_vlm``."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return ModelManifest(model_id=MODEL_ID, simple_class_path="clip_cycles.integrations.lmms_bridge.ClipCyclesVLM")


def __getattr__(name: str) -> Any:
    # The model class subclasses lmms-eval's base, so it exists only when lmms-eval does.
    if name == "ClipCyclesVLM":
        cls = _make_model_class()
        globals()["ClipCyclesVLM"] = cls
        return cls
    raise AttributeError(name)


def _make_model_class() -> type:
    base = _lmms_base()

    class ClipCyclesVLM(base):  # type: ignore[misc, valid-type]
        """lmms-eval model scoring like the ``hf_vlm`` backend: summed (or mean) caption log-likelihood."""

        def __init__(
            self,
            pretrained: str,
            device: str = "cpu",
            batch_size: int | str = 16,
            score: str = "sum",
            revision: str | None = None,
            **kwargs: Any,
        ) -> None:
            super().__init__()

            with no_prompts():  # trust_remote_code=False already; nothing else may ask on stdin either
                self.scorer, _, _ = load_hf_vlm(pretrained, revision, None, str(device))
            self.batch_size_per_gpu = int(batch_size)
            self.score = PromptConfig(score=score).score

        def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
            from tqdm import tqdm

            work = []
            for request in requests:
                context, continuation, doc_to_visual, doc_id, task, split = request.args
                visuals = doc_to_visual(self.task_dict[task][split][doc_id])
                if len(visuals) != 1:
                    raise ValueError(f"{task} doc {doc_id}: {MODEL_ID} scores one image per request, got {len(visuals)}")
                prompt = context if "{image}" in context else "{image} " + context
                caption = continuation[1:] if continuation.startswith(" ") else continuation
                work.append((prompt, visuals[0], caption))
            out: list[tuple[float, bool]] = []
            starts = range(0, len(work), self.batch_size_per_gpu)
            for start in tqdm(starts, desc="clip_cycles pair scores", disable=progress_disable()):
                batch = work[start : start + self.batch_size_per_gpu]
                for prompt in dict.fromkeys(p for p, _, _ in batch):
                    members = [(i, image, caption) for i, (p, image, caption) in enumerate(batch) if p == prompt]
                    scores = self.scorer.score_batch(
                        [m[1] for m in members], [m[2] for m in members], PromptConfig(prompt=prompt, score=self.score)
                    )
                    for (i, _, _), row in zip(members, scores):
                        value = row[0] / row[1] if self.score == "mean" else row[0]
                        out.append((start + i, float(value)))  # type: ignore[arg-type]
            ordered = sorted(out)
            return [(float(v), False) for _, v in ordered]

        def generate_until(self, requests: list[Any]) -> list[str]:
            raise NotImplementedError(f"{MODEL_ID} only answers log-likelihood requests (cycle tasks)")

        def generate_until_multi_round(self, requests: list[Any]) -> list[str]:
            raise NotImplementedError(f"{MODEL_ID} only answers log-likelihood requests (cycle tasks)")

    ClipCyclesVLM.__module__ = __name__
    ClipCyclesVLM.__qualname__ = "ClipCyclesVLM"
    return ClipCyclesVLM


if __name__ == "__main__":  # pragma: no cover
    # The command that writes the task folder is in the commands layer (one above this one): say so rather
    # than run this library module as a script, do nothing and exit 0.
    sys.exit(f"{__name__} is a library module; write the task folder with the commands package's lmms_bridge (README.md)")
