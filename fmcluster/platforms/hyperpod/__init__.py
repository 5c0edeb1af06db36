"""SageMaker HyperPod, for every kind whose nodes it runs (hyperpod-slurm, hyperpod-eks): the cluster and its
instance groups, the instance role, the lifecycle scripts' bucket, and its quota checks and status."""
