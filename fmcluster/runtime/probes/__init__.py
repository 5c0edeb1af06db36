"""Probes: read and parse the node for the checks (fmcluster.runtime.checks), which only judge what they found.

The node itself (file reads under --root, bounded commands) is fmcluster.runtime.node; the context a probe memoizes
its answer in is fmcluster.runtime.context.

- nvidia_smi: the nvidia-smi query, ``nvlink -s`` and ``topo -m``, parsed strictly
- kernel_log: Xid / SXid / fallen-off-the-bus events of this boot (/dev/kmsg) and their classes
- installed: versions of the installed stack (driver module, CUDA, EFA installer, libfabric, aws-ofi-nccl, NCCL, ...)
- pci: NVIDIA GPUs on the PCI bus and the PCIe link state of GPUs and EFA devices
- efa: EFA devices under /sys/class/infiniband
- systemd: ``systemctl is-active`` of the units the profile cares about
- mounts: the /proc/mounts table, the mount holding a path, symlinks followed without touching network mounts

A probe that takes the check context (fmcluster.runtime.context.Ctx) memoizes its answer there, so every check asking
shares one read or one command.
"""
