"""Imported first by the ParallelCluster gate scripts (run in .venv-pcluster): every AWS API call raises instead of
reaching the network, and is recorded in BLOCKED, so ParallelCluster's validators run offline and say what they
could not check."""

from __future__ import annotations

import os
from typing import Any, List

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # the schema asks for a region (root volume defaults)
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

import botocore.client  # noqa: E402
from botocore.exceptions import BotoCoreError  # noqa: E402

BLOCKED: List[str] = []


class OfflineBlockedError(BotoCoreError):
    fmt = "AWS API call blocked (offline gate): {service}.{operation}"


def _blocked_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
    service = self.meta.service_model.service_name
    BLOCKED.append(f"{service}.{operation_name}")
    raise OfflineBlockedError(service=service, operation=operation_name)


botocore.client.BaseClient._make_api_call = _blocked_api_call  # type: ignore[method-assign]
