"""Checking a cluster and its jobs against the plan: fabric acceptance (`fmcluster accept`: nccl-tests output per
message size against the planner's bound and published results) and the plan's bound as Prometheus recording rules
for the job dashboard (`fmcluster plan-rules`). docs/observability.md, "Fabric acceptance" and "Job dashboard and
the plan's bound". Imports the planner's public functions only."""
