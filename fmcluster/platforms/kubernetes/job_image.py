"""The image the Kubernetes kinds' first job runs in: AWS's nccl-tests build (EFA installer, aws-ofi-nccl, NCCL and
nccl-tests under /opt/nccl-tests/build) on Amazon ECR Public (https://gallery.ecr.aws/hpc-cloud/nccl-tests), which
every region pulls from; `--image` names a copy in the cluster's own region instead. Built from aws-samples/
awsome-distributed-training, micro-benchmarks/nccl-tests/nccl-tests.Dockerfile. Unverified: that this tag stays
published."""

from __future__ import annotations

from fmcluster.spec.orchestrator import JobImage

NCCL_TESTS_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:cuda13.0.2-efa1.48.0-ofiv1.19.0-ncclv2.30.4-1-testsv2.18.3"
NCCL_TESTS_DIR = "/opt/nccl-tests/build"

CONTAINER = JobImage(
    name=f"AWS's nccl-tests container image ({NCCL_TESTS_IMAGE})", nccl_tests=NCCL_TESTS_DIR, container=True,
    source="https://github.com/aws-samples/awsome-distributed-training/blob/main/micro-benchmarks/nccl-tests/"
           "nccl-tests.Dockerfile")
