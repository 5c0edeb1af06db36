"""The spec's `observability` section: Amazon Managed Prometheus, alert routing, Managed Grafana."""

from __future__ import annotations

import re
from typing import List

from pydantic import Field, field_validator

from fmcluster.spec.base import SpecModel


class Observability(SpecModel):
    enabled: bool = Field(True, description="Deploy the observability stack (AMP, alerts, dashboards).")
    alert_emails: List[str] = Field(default_factory=list, description="Addresses subscribed to the alert topic.")
    grafana: bool = Field(False, description="Amazon Managed Grafana workspace (sign-in via IAM Identity Center).")
    scrape_interval_seconds: int = Field(30, ge=10, le=300, description="How often node collectors scrape.")

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, v: List[str]) -> List[str]:
        bad = [e for e in v if not re.match(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", e)]
        if bad:
            raise ValueError(f"not e-mail addresses: {', '.join(bad)}")
        return v
