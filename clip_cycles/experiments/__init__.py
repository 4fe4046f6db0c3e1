"""Paper-1 experiments on cached features: probes, transfer, OE, synthetic controls, report."""
