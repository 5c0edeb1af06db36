"""The capacity planner: `fmcluster plan` and `fmcluster diagram`.

Offline figures from a cluster spec and a model description: memory fit per GPU for each
parallel layout, step-time lower bounds (compute and each collective, on NVLink or EFA),
checkpoint and data-path times, cost, and pictures of the cluster. Imports only the spec
and the catalog from the package (never aws_cdk): a plan runs in well under a second.
docs/planning.md explains every formula and its source.
"""
