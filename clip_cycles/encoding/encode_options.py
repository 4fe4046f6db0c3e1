"""``EncodeOptions``: the batch size of the encoders (CLIP features and VLM pair scores), its range declared once.

:func:`clip_cycles.encoding.encoder.encode` and :func:`clip_cycles.encoding.vlm_scores.score_pairs`
both validate their ``batch_size`` through this one declaration, so a bad value reads the same
from either::

    EncodeOptions option --batch-size (batch_size): must be a positive number of items per batch, got 0 (...)
"""

from __future__ import annotations

from pydantic import Field

from clip_cycles.schemas.options import Options

#: Images per batch of the feature encoder (captions go in batches of at least this many).
DEFAULT_BATCH_SIZE: int = 64


class EncodeOptions(Options):
    """Settings of one encoding call."""

    batch_size: int = Field(
        DEFAULT_BATCH_SIZE,
        ge=1,
        json_schema_extra={"flag": "--batch-size"},
        description="a positive number of items per batch",
    )
