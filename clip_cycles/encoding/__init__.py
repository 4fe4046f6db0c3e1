"""Model specs and flags, backends, the cached encoder, feature cache, distributed encoding."""
