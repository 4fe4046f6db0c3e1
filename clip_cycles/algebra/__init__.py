"""The cycle algebra and its audits: numpy only, no I/O."""
