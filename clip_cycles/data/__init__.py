"""Cycle families, their sources (coco, gqa, shapes), the built folder format and the builders."""
