"""Cycle families: the family registry, the COCO and GQA family builders, and a build's settings (BuildConfig)."""
