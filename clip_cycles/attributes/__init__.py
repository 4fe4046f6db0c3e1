"""Paper-2 attribute generalization splits: concepts, splitters, probes, experiments."""
