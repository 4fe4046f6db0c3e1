"""The additive audit: shortcut probes that learn, then score exactly 0.5 on exact cycles.

Theorem 1: a comparison cancels every additive score a(u) + b(v) iff every image and
caption has signed degree zero in it. The audit makes that claim testable on the real
features of a split:

1. It trains three additive probes, image-only ``a(u) = w.phi(u) + c``, text-only
   ``b(v) = w.psi(v) + c`` and additive (both), with binary cross-entropy on *pairs*
   (label 1 for a valid pair, 0 for an invalid one). Pairs carry absolute scores, so the
   probes really learn whatever marginal cue the pairs hold (unlike the cycle loss,
   whose gradient for an additive head is exactly zero). By default the pairs are the
   two matched (1) and two swapped (0) pairs of every training comparison; an
   unblocked pair set (``train_pairs``) may be given instead, e.g. a marker planted on
   negatives.
2. It reports what they learned: pair AUROC of valid vs invalid pairs, pooled without
   blocks (``eval_pairs``, default: the four pairs of every test comparison).
3. It scores each probe's float64 logits on the test comparisons with the exact half-tie
   rule and checks every comparison's signed degrees (Theorem 1) one by one.

It passes iff every test comparison is balanced and every probe's accuracy on them is
exactly 0.5. On a design of cycles both hold by construction; on a design that is not
made of cycles (hard negatives: one image, a true and a false caption) the balance check
fails and names the witness: the vertex whose signed degree is nonzero, and the value
the additive score that is 1 on it alone gets on that comparison.

The fits are vectorised numpy (float64 Adam, :class:`clip_cycles.heads.training.NumpyAdam`,
on mini-batches of the features already in memory), run by the shared training loop
(:func:`clip_cycles.heads.training.fit`: seeded batch order, no validation, last epoch):
the audit runs once per (model, family, seed) in evaluation and must be cheap.
Epochs follow paper 1 (5 for the audit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clip_cycles.algebra.audits import signed_degrees
from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE, cycle_credits, validate_features
from clip_cycles.heads.training import NumpyAdam, NumpyLoss, TrainConfig, fit

#: The probes of the audit, in report order (names as in clip_cycles.heads.score_heads.HEADS).
ADDITIVE_PROBES = ("image_only", "text_only", "additive")

#: Test designs the audit accepts: rows (u1, u2, v1, v2) of cycles, or (u, v_true, v_false) of hard negatives.
DESIGNS = ("cycles", "hard_negatives")

#: Audit epochs (paper 1, Appendix E).
AUDIT_EPOCHS: int = 5


@dataclass(frozen=True)
class Comparisons:
    """A linear test design: comparison i is sum_j weights[j] * s(images[i, j], captions[i, j])."""

    design: str
    images: np.ndarray  # (N, k) feature rows
    captions: np.ndarray  # (N, k) feature rows
    weights: np.ndarray  # (k,) signed weights

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def pairs(self) -> np.ndarray:
        """The evaluated pairs as (image, caption, label) rows: label 1 for positive weight, 0 for negative."""
        labels = np.broadcast_to((self.weights > 0).astype(np.int64), self.images.shape)
        return np.stack([self.images.ravel(), self.captions.ravel(), labels.ravel()], axis=1)

    def values(self, image_logit: np.ndarray, caption_logit: np.ndarray) -> np.ndarray:
        """T_i(s) for the additive score s(u, v) = image_logit[u] + caption_logit[v], in float64."""
        scores = image_logit[self.images] + caption_logit[self.captions]
        return scores @ self.weights


def comparisons(rows: object, design: str, n_images: int, n_captions: int, name: str) -> Comparisons:
    """Validate a test or train design and return its :class:`Comparisons`.

    ``cycles``: (N, 4) rows (u1, u2, v1, v2), weights +1, -1, -1, +1 on (u1,v1), (u1,v2),
    (u2,v1), (u2,v2). ``hard_negatives``: (N, 3) rows (u, v_true, v_false), weights +1, -1.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    width = 4 if design == "cycles" else 3
    array = np.asarray(rows)
    if array.ndim != 2 or array.shape[1] != width or array.shape[0] == 0:
        what = "(u1, u2, v1, v2)" if design == "cycles" else "(u, v_true, v_false)"
        raise ValueError(f"{name}: empty cycle set or wrong shape {array.shape}; need (N, {width}) rows {what}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name}: indices must be integers, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if design == "cycles":
        images = array[:, [0, 0, 1, 1]]
        captions = array[:, [2, 3, 2, 3]]
        weights = np.array([1.0, -1.0, -1.0, 1.0])
    else:
        images = array[:, [0, 0]]
        captions = array[:, [1, 2]]
        weights = np.array([1.0, -1.0])
    for what, index, bound in (("image", images, n_images), ("caption", captions, n_captions)):
        bad = (index < 0) | (index >= bound)
        if bad.any():
            i = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ValueError(f"{name}: row {i} has a {what} index outside [0, {bound})")
    return Comparisons(design, images, captions, weights)


def _validate_pairs(pairs: object, n_images: int, n_captions: int, name: str) -> np.ndarray:
    array = np.asarray(pairs)
    if array.ndim != 2 or array.shape[1] != 3 or array.shape[0] == 0:
        raise ValueError(f"{name}: need (N, 3) rows (image, caption, label), got shape {array.shape}")
    array = array.astype(np.int64)
    if not np.isin(array[:, 2], (0, 1)).all():
        raise ValueError(f"{name}: labels must be 0 or 1")
    if len(np.unique(array[:, 2])) < 2:
        raise ValueError(f"{name}: needs both labels (valid 1 and invalid 0) to train or to compute an AUROC")
    if (array[:, 0] < 0).any() or (array[:, 0] >= n_images).any() or (array[:, 1] < 0).any() or (array[:, 1] >= n_captions).any():
        raise ValueError(f"{name}: an image or caption index is out of range")
    return array


def pair_auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """AUROC of label-1 scores over label-0 scores (Mann-Whitney; ties count one half)."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(labels) == 1
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    ranks = average_ranks(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, tied values sharing their mean rank (all NaN if any value is NaN).

    Numpy alone: importing scipy.stats for this costs more than the audit of a family
    (issue 29). Mean ranks are half-integers, exact in float64, so any correct
    computation gives the same bits.
    """
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).any():
        return np.full(values.shape, np.nan)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, values.size))
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(starts + 1 + (counts - 1) / 2.0, counts)
    return ranks


@dataclass
class ProbeFit:
    """A fitted additive probe: image and caption logit tables (zero for the side it does not see)."""

    image_logit: np.ndarray
    caption_logit: np.ndarray
    steps: int
    final_loss: float


def fit_additive_probes(
    heads: tuple[str, ...],
    phi: np.ndarray,
    psi: np.ndarray,
    pairs: np.ndarray,
    epochs: int = AUDIT_EPOCHS,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 512,
    seed: int = 0,
) -> dict[str, ProbeFit]:
    """Fit several additive probes at once: BCE on (image, caption, label) pairs, numpy Adam in float64.

    Every probe draws the same batches (one seed), so each batch's rows are gathered once and the
    probes step together: their parameters are one flat array, which Adam updates element by element
    exactly as it would update each probe's arrays alone (so each fit equals that head fitted alone,
    bit for bit: the tests hold it to a hand-written float64 Adam), in a third of the numpy calls (an
    audit's probes were most of a cold evaluation's audit time, each step's cost being Python's).
    """
    for head in heads:
        if head not in ADDITIVE_PROBES:
            raise ValueError(f"unknown additive probe {head!r}; known: {ADDITIVE_PROBES}")
    TrainConfig.make(epochs=epochs, batch_size=batch_size)  # the training ranges, declared once there
    # Each probe's parameters, in this order, as views of one flat array: [image weights], [text weights], bias.
    # Adam moves only the weights a probe sees: the unseen side's weights have zero gradient and zero decay
    # from zero, so they stay exactly zero, as if Adam had stepped them too.
    sides = [(head in ("image_only", "additive"), head in ("text_only", "additive")) for head in heads]
    sizes = [(phi.shape[1] if use_image else 0, psi.shape[1] if use_text else 0) for use_image, use_text in sides]
    flat = np.zeros(sum(a + b + 1 for a, b in sizes))
    views: list[tuple[np.ndarray | None, np.ndarray | None, np.ndarray]] = []
    at = 0
    for n_image, n_text in sizes:
        w_image = flat[at : at + n_image] if n_image else None
        w_text = flat[at + n_image : at + n_image + n_text] if n_text else None
        at += n_image + n_text + 1
        views.append((w_image, w_text, flat[at - 1 : at]))
    need_image = any(use_image for use_image, _ in sides)
    need_text = any(use_text for _, use_text in sides)
    labels = pairs[:, 2].astype(np.float64)

    def batch_loss(batch: np.ndarray) -> NumpyLoss:
        # np.take: the same rows as fancy indexing, copied faster.
        x_image = np.take(phi, pairs[batch, 0], axis=0) if need_image else None
        x_text = np.take(psi, pairs[batch, 1], axis=0) if need_text else None
        y = labels[batch]
        logits = np.empty((len(heads), len(batch)))
        for k, (w_image, w_text, bias) in enumerate(views):
            logit = logits[k]
            logit[:] = bias[0]
            if w_image is not None:
                logit += x_image @ w_image
            if w_text is not None:
                logit += x_text @ w_text
        residuals = (1.0 / (1.0 + np.exp(-logits)) - y) / len(batch)  # d mean BCE / d logit, probe by probe
        grads: list[np.ndarray] = []
        for k, (w_image, w_text, _) in enumerate(views):
            residual = residuals[k]
            grads += [x.T @ residual for x, w in ((x_image, w_image), (x_text, w_text)) if w is not None]
            grads.append(np.array([residual.sum()]))
        # No loss value: only the run's steps are read, and each probe's final loss is computed after the fit.
        return NumpyLoss(value=None, grads=[np.concatenate(grads)])

    # No validation: an additive probe has nothing to select on exact cycles, so the last epoch is kept.
    run = fit(
        NumpyAdam([flat], lr=lr, weight_decay=weight_decay),
        batch_loss,
        len(pairs),
        np.random.default_rng(seed).permutation,
        epochs,
        batch_size,
    )
    fits: dict[str, ProbeFit] = {}
    for head, (w_image, w_text, bias) in zip(heads, views):
        image_logit = (phi @ w_image if w_image is not None else np.zeros(phi.shape[0])) + bias[0]
        caption_logit = psi @ w_text if w_text is not None else np.zeros(psi.shape[0])
        logit = image_logit[pairs[:, 0]] + caption_logit[pairs[:, 1]]
        loss = float(np.mean(np.logaddexp(0.0, logit) - labels * logit))
        fits[head] = ProbeFit(image_logit=image_logit, caption_logit=caption_logit, steps=run.steps, final_loss=loss)
    return fits


def fit_additive_probe(
    head: str,
    phi: np.ndarray,
    psi: np.ndarray,
    pairs: np.ndarray,
    epochs: int = AUDIT_EPOCHS,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 512,
    seed: int = 0,
) -> ProbeFit:
    """BCE on (image, caption, label) pairs for an additive head, with numpy Adam in float64.

    Weights start at zero, so the first step moves along the mean feature difference of
    valid and invalid pairs: whatever marginal cue the pairs carry is picked up at once.
    The bias lives on the image side (any split of a constant gives the same logits).
    """
    return fit_additive_probes((head,), phi, psi, pairs, epochs, lr, weight_decay, batch_size, seed)[head]


@dataclass
class ProbeAudit:
    """One additive probe: steps taken, what it learned (pair AUROC) and its exact test accuracy."""

    head: str
    cycle_acc: float
    max_abs_delta: float
    steps_taken: int
    train_loss: float
    pair_auroc: float
    train_pair_auroc: float

    @property
    def passed(self) -> bool:
        """True iff the exact accuracy on the test comparisons is exactly 0.5."""
        return self.cycle_acc == 0.5


@dataclass
class AdditiveAuditReport:
    """Every additive probe on the test comparisons; ``passed`` iff the design is balanced and all score 0.5."""

    probes: dict[str, ProbeAudit]
    design: str
    n_train_pairs: int
    n_eval_pairs: int
    eval_pairs: str
    n_test: int
    n_unbalanced: int
    witness: dict[str, Any] | None
    epochs: int
    seed: int
    tie_tolerance: float
    n_val: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True iff every test comparison is balanced and every probe scored exactly 0.5."""
        return self.n_unbalanced == 0 and all(p.passed for p in self.probes.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        return {
            "passed": self.passed,
            "design": self.design,
            "probes": {
                name: {
                    "cycle_acc": p.cycle_acc,
                    "max_abs_delta": p.max_abs_delta,
                    "passed": p.passed,
                    "steps_taken": p.steps_taken,
                    "train_loss": p.train_loss,
                    "pair_auroc": p.pair_auroc,
                    "train_pair_auroc": p.train_pair_auroc,
                }
                for name, p in self.probes.items()
            },
            "pair_auroc_over": self.eval_pairs,
            "n_train_pairs": self.n_train_pairs,
            "n_eval_pairs": self.n_eval_pairs,
            "n_test": self.n_test,
            "n_val": self.n_val,
            "n_unbalanced_comparisons": self.n_unbalanced,
            "witness": self.witness,
            "epochs": self.epochs,
            "seed": self.seed,
            "tie_tolerance": self.tie_tolerance,
            "failures": list(self.failures),
        }


def unbalanced_comparisons(test: Comparisons) -> np.ndarray:
    """Indices of test comparisons with a nonzero signed degree (Theorem 1), vectorised over comparisons."""
    w = test.weights
    same_image = test.images[:, :, None] == test.images[:, None, :]
    same_caption = test.captions[:, :, None] == test.captions[:, None, :]
    image_degree = same_image @ w  # degree of the image of edge j, within its comparison
    caption_degree = same_caption @ w
    return np.flatnonzero((np.abs(image_degree) > 1e-12).any(axis=1) | (np.abs(caption_degree) > 1e-12).any(axis=1))


def additive_audit(
    image_features: object,
    caption_features: object,
    train_cycles: object,
    test_cycles: object,
    val_cycles: object | None = None,
    epochs: int = AUDIT_EPOCHS,
    seed: int = 0,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 512,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    *,
    design: str = "cycles",
    train_pairs: object | None = None,
    eval_pairs: object | None = None,
) -> AdditiveAuditReport:
    """Train image-only, text-only and additive probes with pair BCE; audit them on the test design.

    Parameters
    ----------
    image_features, caption_features:
        Frozen feature tables; the designs index their rows.
    train_cycles, test_cycles:
        Rows of ``design``: (u1, u2, v1, v2) cycles or (u, v_true, v_false) hard negatives.
        The training pairs are their evaluated pairs (positive weight: label 1).
    val_cycles:
        Optional; only counted (an additive probe has nothing to select on exact cycles).
    epochs, seed, lr, weight_decay, batch_size:
        Training settings (paper 1: 5 epochs).
    train_pairs, eval_pairs:
        Optional (N, 3) (image, caption, label) rows of an unblocked design to train on and to
        compute the pair AUROC on, instead of the pairs of ``train_cycles`` / ``test_cycles``.

    Returns
    -------
    AdditiveAuditReport; ``passed`` iff every test comparison is balanced and every probe's
    exact accuracy on them is 0.5. When some comparison is unbalanced the report names the
    Theorem 1 witness of the first one.
    """
    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    n_images, n_captions = phi.shape[0], psi.shape[0]
    train = comparisons(train_cycles, design, n_images, n_captions, "train design")
    test = comparisons(test_cycles, design, n_images, n_captions, "test design")
    n_val = 0 if val_cycles is None else len(comparisons(val_cycles, design, n_images, n_captions, "validation design"))
    fit_pairs = train.pairs() if train_pairs is None else _validate_pairs(train_pairs, n_images, n_captions, "train_pairs")
    scored_pairs = test.pairs() if eval_pairs is None else _validate_pairs(eval_pairs, n_images, n_captions, "eval_pairs")
    eval_label = (
        f"the {len(scored_pairs)} evaluated pairs of the test {design}, pooled"
        if eval_pairs is None
        else f"{len(scored_pairs)} given unblocked pairs"
    )
    failures: list[str] = []
    unbalanced = unbalanced_comparisons(test)
    witness = None
    if unbalanced.size:
        i = int(unbalanced[0])
        found = signed_degrees(test.images[i].tolist(), test.captions[i].tolist(), test.weights.tolist()).witness
        assert found is not None  # the vectorised check and signed_degrees agree on imbalance
        witness = {
            "comparison": i,
            "side": found.side,
            "vertex": int(found.vertex),
            "value": found.value,
            "score": f"the additive score that is 1 on {found.side} row {found.vertex} and 0 elsewhere",
        }
        failures.append(
            f"{unbalanced.size} of {len(test)} test comparisons are unbalanced (Theorem 1); witness: "
            f"{found.side} row {found.vertex} has signed degree {found.value:g} in comparison {i}"
        )
    probes: dict[str, ProbeAudit] = {}
    # Fitted on the scored pairs themselves (``audit_fit: scored``): one AUROC serves both.
    same_pairs = fit_pairs.shape == scored_pairs.shape and bool(np.array_equal(fit_pairs, scored_pairs))
    fits = fit_additive_probes(ADDITIVE_PROBES, phi, psi, fit_pairs, epochs, lr, weight_decay, batch_size, seed)
    for name in ADDITIVE_PROBES:
        fit = fits[name]
        values = test.values(fit.image_logit, fit.caption_logit)
        scored_auroc = pair_auroc(fit.image_logit[scored_pairs[:, 0]] + fit.caption_logit[scored_pairs[:, 1]], scored_pairs[:, 2])
        train_auroc = (
            scored_auroc
            if same_pairs
            else pair_auroc(fit.image_logit[fit_pairs[:, 0]] + fit.caption_logit[fit_pairs[:, 1]], fit_pairs[:, 2])
        )
        audit = ProbeAudit(
            head=name,
            cycle_acc=float(cycle_credits(values, tie_tolerance).mean()),
            max_abs_delta=float(np.max(np.abs(values))),
            steps_taken=fit.steps,
            train_loss=fit.final_loss,
            pair_auroc=scored_auroc,
            train_pair_auroc=train_auroc,
        )
        probes[name] = audit
        if not audit.passed:
            failures.append(
                f"{name}: accuracy {audit.cycle_acc!r} != 0.5 on the test {design} (max |T| {audit.max_abs_delta:.3g})"
            )
    return AdditiveAuditReport(
        probes=probes, design=design, n_train_pairs=int(len(fit_pairs)), n_eval_pairs=int(len(scored_pairs)),
        eval_pairs=eval_label, n_test=len(test), n_unbalanced=int(unbalanced.size), witness=witness,
        epochs=epochs, seed=seed, tie_tolerance=tie_tolerance, n_val=n_val, failures=failures,
    )  # fmt: skip
