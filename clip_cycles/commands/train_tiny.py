"""``clip-cycles train-tiny``: train the cycles-tiny CLIP (:func:`clip_cycles.encoding.tiny_model.train_tiny`)."""

from __future__ import annotations

import argparse
import json
import os

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.encoding.tiny_model import train_tiny
from clip_cycles.schemas.options import Options


class TrainTinyOptions(Options):
    """Options of ``clip-cycles train-tiny``."""

    out: str = Field("cycles-tiny", json_schema_extra={"flag": "--out", "help": "folder for the checkpoint and its card"})
    work: str | None = Field(
        None, json_schema_extra={"flag": "--work", "help": "work folder (world, resumable state); default OUT/work"}
    )
    steps: int = Field(2500, ge=1, json_schema_extra={"flag": "--steps"})
    batch_size: int = Field(128, ge=1, json_schema_extra={"flag": "--batch-size"})
    lr: float = Field(1e-3, gt=0.0, json_schema_extra={"flag": "--lr", "type": "finite"})
    seed: int = Field(0, ge=0, json_schema_extra={"flag": "--seed", "type": "seed"})


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles train-tiny``."""
    configure(parser, TrainTinyOptions, run)


def run(options: TrainTinyOptions) -> int:
    """Train the tiny model and print the card's summary."""
    work = options.work or os.path.join(options.out, "work")
    card = train_tiny(options.out, work, steps=options.steps, batch_size=options.batch_size, lr=options.lr, seed=options.seed)
    print(json.dumps({k: card[k] for k in ("model", "pretrained", "sha256", "bytes", "training")}, indent=2))
    return 0
