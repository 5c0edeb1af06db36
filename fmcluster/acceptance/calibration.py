"""The published nccl-tests runs the fabric model (fabric_model.py) is calibrated on, each with its source.

The peak is the run's highest busbw (the lower of out-of-place and in-place) at 1 GiB or more, as `accept` reads
a run. tests/acceptance/test_fabric_model.py holds every run's peak / the model's expected value within
`fabric_model.ERROR_BAND`; a new published run goes here, and the efficiencies move only if it falls outside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from fmcluster import catalog
from fmcluster.acceptance import references
from fmcluster.acceptance.fabric_model import Fabric

# aws-samples/aws-hpc-tutorials, content/04-Verify-Cluster/_index.md: "p4de.24xlarge | 400 Gbps EFAv1 | 600 GB/s
# NVSwitch" (8 x A100). Not a type fmcluster deploys; its EFA-bound run calibrates the EFA path at another speed.
P4DE = Fabric(gpus=8, nvlink_gbs_one_way=600 / 2, efa_gbs=400 / 8, domain_gpus=8)
P4DE_SOURCE = "https://github.com/aws-samples/aws-hpc-tutorials/blob/main/content/04-Verify-Cluster/_index.md"
AWS_SAMPLE_EKS = references.AWS_SAMPLE + " (Amazon EKS section: 2 x p5.48xlarge, NCCL 2.18.5, up to 2 GiB)"


@dataclass(frozen=True)
class PublishedRun:
    label: str
    fabric: Fabric
    collective: str
    hosts: int
    ranks_per_host: int
    peak_gbs: float
    source: str


def runs() -> List[PublishedRun]:
    p5 = Fabric.of(catalog.get("p5.48xlarge"))
    found = [PublishedRun(f"{t} {c} {n} nodes", p5, c, n, 8,
                          max(bw for size, bw in ref.points if size >= 2**30), ref.source)
             for (t, c, n), ref in sorted(references.PUBLISHED.items())]
    found += [
        # the AWS sample's Amazon EKS run stops at 2 GiB, still rising: 437.79 GB/s out-of-place, 437.89 in-place
        PublishedRun("p5.48xlarge all_reduce 2 nodes (EKS, to 2 GiB)", p5, "all_reduce", 2, 8, 437.79, AWS_SAMPLE_EKS),
        # the AWS sample's 2 x p4de.24xlarge all_reduce_perf to 2 GiB: 78.33 GB/s both placements
        PublishedRun("p4de.24xlarge all_reduce 2 nodes", P4DE, "all_reduce", 2, 8, 78.33,
                     references.AWS_SAMPLE + "; facts: " + P4DE_SOURCE),
    ]
    return found
