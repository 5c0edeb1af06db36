"""The spec's `observability` section: Amazon Managed Prometheus, alert routing, Managed Grafana."""

from __future__ import annotations

import re
from typing import Dict, List

from pydantic import Field, field_validator

from fmcluster.spec.base import Problem, SpecModel, raise_problems

# Each address is an SNS subscription in the observability stack, beside its own dozen resources, and CloudFormation
# takes at most 500 resources per stack (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/
# cloudformation-limits.html). A hundred keeps far clear of it; more people belong on a distribution list.
MAX_ALERT_EMAILS = 100


class Observability(SpecModel):
    enabled: bool = Field(True, description="Deploy the observability stack (AMP, alerts, dashboards).")
    alert_emails: List[str] = Field(default_factory=list, description="Addresses subscribed to the alert topic.")
    grafana: bool = Field(False, description="Amazon Managed Grafana workspace (sign-in via IAM Identity Center).")
    scrape_interval_seconds: int = Field(30, ge=10, le=300, description="How often node collectors scrape.")

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, v: List[str]) -> List[str]:
        if len(v) > MAX_ALERT_EMAILS:
            raise ValueError(f"{len(v)} addresses; at most {MAX_ALERT_EMAILS}: each is an SNS subscription in the "
                             "observability stack and CloudFormation takes at most 500 resources per stack "
                             "(CloudFormation quotas); subscribe a distribution list instead")
        bad = [e for e in v if not re.match(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", e)]
        if bad:
            raise ValueError(f"not e-mail addresses: {', '.join(bad)}")
        first: Dict[str, int] = {}
        found: List[Problem] = []
        for i, address in enumerate(v):
            j = first.setdefault(address.lower(), i)
            if j != i:
                found.append((f"[{i}]", f"{address} is entry {j} again (addresses compare without case); "
                                        "each address is subscribed once"))
        raise_problems(found)
        return v
