"""Checking a cluster and its jobs: fabric acceptance (`fmcluster accept`: nccl-tests output against a model of the
fabric, fabric_model.py, calibrated on published runs, calibration.py, and against published results per size,
references.py; which of the group's nodes it tested, coverage.py), the fabric job's coverage and cost
(`fmcluster job nccl --cover`, cover.py), and the plan's bound as Prometheus recording rules for the job dashboard
(`fmcluster plan-rules`). docs/observability.md, "Fabric acceptance" and "Job dashboard and the plan's bound".
Imports the planner's public functions only."""
