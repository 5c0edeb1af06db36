"""`fmcluster diff`: what a change to a cluster does to its data, nodes, control plane and capacity."""

from fmcluster.diff.consequences import Report, compare
from fmcluster.diff.findings import CLASSES, Finding

__all__ = ["CLASSES", "Finding", "Report", "compare"]
