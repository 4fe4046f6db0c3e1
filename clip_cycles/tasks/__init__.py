"""The task registry and the shipped task YAMLs."""
