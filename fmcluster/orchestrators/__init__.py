"""Orchestrators: THE plug-in point. One thin folder per kind (none, pcs, hyperpod_slurm, parallelcluster, eks,
hyperpod_eks), each declaring an `OrchestratorKind` subclass and instance (kind.py) composed from fmcluster/platforms,
listed in the composition root, fmcluster/registry.py."""
