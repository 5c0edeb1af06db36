"""Every CDK feature flag is decided in one place, and each departure from aws-cdk-lib's recommendation says why."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Dict

import aws_cdk
import pytest

from fmcluster.app import app_context
from fmcluster.feature_flags import DEVIATIONS, FLAGS


@pytest.fixture(scope="module")
def recommended() -> Dict[str, Any]:
    """The installed aws-cdk-lib's recommended-feature-flags.json (what `cdk init` writes into cdk.json)."""
    (bundle,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return json.load(member)


def test_every_flag_aws_cdk_lib_recommends_is_decided(recommended):
    assert sorted(set(recommended) - set(FLAGS)) == [], "new aws-cdk-lib flags: decide them in feature_flags.py"
    assert sorted(set(FLAGS) - set(recommended)) == []


def test_departures_from_the_recommendation_are_exactly_the_explained_ones(recommended):
    departures = {flag for flag, value in FLAGS.items() if value != recommended[flag]}
    assert departures == set(DEVIATIONS)
    assert all(len(reason) > 40 for reason in DEVIATIONS.values())


def test_the_storage_stack_is_protected_by_strong_references():
    assert FLAGS["@aws-cdk/core:defaultCrossStackReferences"] == "strong"


def test_every_app_gets_the_flags_and_cdk_json_sets_none():
    assert FLAGS.items() <= app_context().items()
    cdk_json = json.loads((Path(__file__).resolve().parent.parent / "cdk.json").read_text())
    assert not [key for key in cdk_json.get("context", {}) if key.startswith("@aws-cdk")]
