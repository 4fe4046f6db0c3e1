"""Zero-shot scoring, the task runners, the eval/encode commands and the demo."""
