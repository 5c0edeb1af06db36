"""`fmcluster plan --serve`: sizing inference replicas (docs/serving.md)."""
