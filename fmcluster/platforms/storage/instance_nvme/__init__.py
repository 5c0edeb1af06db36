"""The instance NVMe, the node-local storage tier: declared in tier.py (`NVME`), where the spec, the planner and every
kind read its name, its path and its size per node. It is no `Store`: nothing is built for it, it has no spec section,
and each node's copy is its own."""
