"""Fabric acceptance: read nccl-tests output and judge bus bandwidth per message size against the planner's bound
and public results for the instance type (`fmcluster accept`). docs/observability.md, "Fabric acceptance"."""
