"""Which EKS support a cluster's Kubernetes version is in on a day, and the control plane billed at its rate: standard
until the version's end-of-standard-support day, extended from the start of that day (UTC)."""

from __future__ import annotations

from datetime import date

import pytest

from fmcluster.platforms.kubernetes import support
from fmcluster.platforms.kubernetes.versions import END_OF_STANDARD_SUPPORT, KUBERNETES_VERSIONS


def test_every_offered_version_has_its_end_of_standard_support_from_the_release_calendar():
    assert set(END_OF_STANDARD_SUPPORT) == set(KUBERNETES_VERSIONS)
    assert END_OF_STANDARD_SUPPORT == {"1.33": "2026-07-29", "1.34": "2026-12-02", "1.35": "2027-03-27"}


@pytest.mark.parametrize("day, key", [(date(2026, 12, 1), support.STANDARD), (date(2026, 12, 2), support.EXTENDED),
                                      (date(2027, 6, 1), support.EXTENDED)])
def test_the_control_plane_bills_extended_support_from_the_day_standard_support_ends(day, key):
    service = support.control_plane_service("1.34", on=day)
    assert service.key == key and service.count == 1
    assert "2026-12-02" in service.detail


def test_without_a_day_the_plan_uses_today():
    assert support.today() == date(2026, 12, 2)  # tests/conftest.py pins the day every test plans on
    assert support.control_plane_service("1.35").key == support.STANDARD
    assert support.control_plane_service("1.33").detail == (
        "1 cluster, Kubernetes 1.33: extended support since 2026-07-29 (a version in standard support costs less)")
