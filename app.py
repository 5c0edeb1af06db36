"""CDK entry point: `cdk synth -c config=examples/other.yaml` (default examples/default.yaml)."""

import os
import sys

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402

from fmcluster.registry import load_spec  # noqa: E402
from fmcluster.spec import SpecError  # noqa: E402

config = cdk.App().node.try_get_context("config") or "examples/default.yaml"
try:
    spec = load_spec(config)
except SpecError as err:
    print(f"{config}: invalid spec", file=sys.stderr)
    for line in err.problems:
        print(f"  {line}", file=sys.stderr)
    sys.exit(2)

from fmcluster.app import build_app  # noqa: E402

build_app(spec).synth()
