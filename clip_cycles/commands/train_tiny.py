"""``clip-cycles train-tiny``: train the cycles-tiny CLIP (:func:`clip_cycles.encoding.tiny_model.train_tiny`)."""

from __future__ import annotations

import argparse
import json
import os

from pydantic import Field

from clip_cycles.commands.flags import finite_float, seed_argument
from clip_cycles.encoding.tiny_model import train_tiny
from clip_cycles.schemas.options import Options


class TrainTinyOptions(Options):
    """Options of ``clip-cycles train-tiny``."""

    out: str = Field("cycles-tiny", json_schema_extra={"flag": "--out"})
    work: str | None = Field(None, json_schema_extra={"flag": "--work"})
    steps: int = Field(2500, ge=1, json_schema_extra={"flag": "--steps"})
    batch_size: int = Field(128, ge=1, json_schema_extra={"flag": "--batch-size"})
    lr: float = Field(1e-3, gt=0.0, json_schema_extra={"flag": "--lr"})
    seed: int = Field(0, json_schema_extra={"flag": "--seed"})


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles train-tiny``."""
    parser.add_argument("--out", default="cycles-tiny", help="folder for the checkpoint and its card")
    parser.add_argument("--work", default=None, help="work folder (world, resumable state); default OUT/work")
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=finite_float, default=1e-3)
    parser.add_argument("--seed", type=seed_argument, default=0)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The namespace as :class:`TrainTinyOptions`, then train and print the card's summary."""
    options = TrainTinyOptions.make(
        out=args.out, work=args.work, steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed
    )
    work = options.work or os.path.join(options.out, "work")
    card = train_tiny(options.out, work, steps=options.steps, batch_size=options.batch_size, lr=options.lr, seed=options.seed)
    print(json.dumps({k: card[k] for k in ("model", "pretrained", "sha256", "bytes", "training")}, indent=2))
    return 0
