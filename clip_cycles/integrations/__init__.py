"""Bridges to the harnesses: the clip_benchmark plugin and its start-up hook, lmms-eval."""
