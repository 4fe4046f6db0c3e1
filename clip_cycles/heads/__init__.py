"""Score heads, losses, the one training loop and the additive audit."""
