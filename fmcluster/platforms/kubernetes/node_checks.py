"""What the boot validator checks on a Kubernetes GPU node (EKS managed nodes, HyperPod on EKS): the host carries the
driver, the EFA kernel module and the container runtime; each job's container brings the rest."""

from __future__ import annotations

# On the EKS AL2023 NVIDIA AMI (and HyperPod's EKS AMI). The AMI carries the driver (580 branch), the EFA
# kernel module and rdma-core (aws-efa-installer --minimal), the container toolkit and containerd; CUDA, NCCL,
# libfabric, aws-ofi-nccl and PyTorch come with each job's container, so their host checks do not apply (nor the
# installer's version: the EFA devices, ports and verbs checks prove the kernel side).
EKS_DISABLED_CHECKS = ("acc.cuda", "efa.installer", "efa.libfabric", "efa.domains", "ofi.plugin", "dist.nccl",
                       "dist.compat", "fw.torch", "efa.memlock", "orch.slurm_node")
EKS_OPTIONAL = ["torch", "gdrcopy", "dcgm", "nccl"]
