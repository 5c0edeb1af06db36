"""Orchestrators: THE plug-in point. One folder per kind (none, pcs, hyperpod), each declaring an
`OrchestratorKind` (kind.py) and listed once in registry.py."""
