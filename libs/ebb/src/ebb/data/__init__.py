"""Data files bundled with ebb (the default AWS us-east-1 instance-type catalog and its generator)."""
