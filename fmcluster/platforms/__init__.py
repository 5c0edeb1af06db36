"""Shared building blocks the orchestrator kinds compose, the way aws-ecs-patterns sits on aws-ecs: EC2 node groups
with EFA launch templates (``ec2``), an EKS control plane with its add-ons, node gate and exporters (``kubernetes``),
a SageMaker HyperPod cluster with its lifecycle scripts (``hyperpod``). A platform never imports a kind."""
