"""Reusable constructs, one concept per module; usable from your own CDK app too."""
