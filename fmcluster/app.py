"""build_app(spec) -> aws_cdk.App: every stack of a cluster, checked by cdk-nag at synth."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from fmcluster.feature_flags import FLAGS
from fmcluster.nag import cdk_provider_handlers, cfn_lint_ignore
from fmcluster.registry import kind_of, load_spec, stores
from fmcluster.spec import ClusterSpec
from fmcluster.stacks.cluster import ClusterStack
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.observability import ObservabilityStack
from fmcluster.stacks.storage import StorageStack, storage_description


class ClusterStacks:
    """The stacks of one cluster, as built (handy for tests and for composing further)."""

    def __init__(self, app: cdk.App, spec: ClusterSpec) -> None:
        self.app = app
        env = cdk.Environment(account=spec.account, region=spec.region)
        self.network = NetworkStack(
            app,
            spec.stack_name("network"),
            spec=spec,
            env=env,
            description=f"fmcluster {spec.name}: VPC, node subnet, EFA security group",
        )
        registered = stores()
        self.storage = StorageStack(
            app,
            spec.stack_name("storage"),
            spec=spec,
            network=self.network,
            stores=registered,
            env=env,
            description=storage_description(spec, registered),
        )
        self.observability: Optional[ObservabilityStack] = None
        if spec.observability.enabled:
            self.observability = ObservabilityStack(
                app,
                spec.stack_name("observability"),
                spec=spec,
                store_rules=[s.rules for s in registered if s.rules is not None and s.section(spec) is not None],
                env=env,
                description=f"fmcluster {spec.name}: Amazon Managed Prometheus, alert rules, alert routing, dashboards",
            )
        if self.observability is not None:
            # the stores' own alarms (a store's servers' view, beside the rules on what the nodes see)
            for alarm in self.storage.alarms:
                self.observability.alarm(alarm)
        self.cluster = ClusterStack(
            app,
            spec.stack_name("cluster"),
            spec=spec,
            kind=kind_of(spec),
            network=self.network,
            storage=self.storage,
            observability=self.observability,
            env=env,
            description=f"fmcluster {spec.name}: placement groups, EFA launch templates, nodes, orchestrator",
        )
        for key, value in {"fmcluster:cluster": spec.name, **spec.tags}.items():
            cdk.Tags.of(app).add(key, value)

    @property
    def all(self) -> List[cdk.Stack]:
        return [s for s in (self.network, self.storage, self.observability, self.cluster) if s is not None]


def app_context(spec: Optional[ClusterSpec] = None, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Context that keeps synthesis offline and deterministic.

    With an explicit account, ``ec2.Vpc`` asks for the region's AZ list (a lookup); the
    spec already names the one AZ the cluster uses, so that answer is given up front.
    """
    ctx: Dict[str, Any] = {
        "aws:cdk:disable-version-reporting": True,
        # feature flags live in one module, not in cdk.json, so `cdk synth` and `fmcluster synth` agree
        **FLAGS,
    }
    if spec is not None and spec.account:
        ctx[f"availability-zones:account={spec.account}:region={spec.region}"] = [spec.availability_zone]
    ctx.update(extra or {})
    return ctx


def new_app(
    spec: Optional[ClusterSpec] = None,
    *,
    outdir: Optional[str] = None,
    context: Optional[Dict[str, Any]] = None,
    nag: bool = True,
) -> cdk.App:
    """An empty app with the context every fmcluster app gets (feature flags, offline AZs) and, with `nag`,
    cdk-nag's AwsSolutions pack at synth. `build_stacks` starts from it; so do tests that build parts."""
    # aws-cdk-lib's built-in CloudFormation validation (a WebAssembly engine) took about 40% of a synth, most of it
    # starting its engine, and by default it reports what it finds as warnings only; every example's templates pass
    # the stricter cfn-lint in CI instead, and cdk-nag still runs (docs/architecture.md, "Synthesis cost").
    app = cdk.App(outdir=outdir, context=app_context(spec, context), builtin_cloud_formation_validation=False)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def build_stacks(
    spec_or_path: Union[ClusterSpec, str, Path],
    *,
    outdir: Optional[str] = None,
    context: Optional[Dict[str, Any]] = None,
    nag: bool = True,
) -> ClusterStacks:
    """Every stack of a spec (or a spec file) in a new app (`.app`), ready to synth.

    cdk-nag's AwsSolutions pack runs at synth; a finding without an acknowledgment
    fails synthesis.
    """
    spec = spec_or_path if isinstance(spec_or_path, ClusterSpec) else load_spec(spec_or_path)
    stacks = ClusterStacks(new_app(spec, outdir=outdir, context=context, nag=nag), spec)
    for stack in stacks.all:
        for handler in cdk_provider_handlers(stack):
            cfn_lint_ignore(
                handler,
                ["W3005"],
                "CDK's custom resource provider declares DependsOn on its role as well as a GetAtt; harmless",
            )
    return stacks


def build_app(
    spec_or_path: Union[ClusterSpec, str, Path],
    *,
    outdir: Optional[str] = None,
    context: Optional[Dict[str, Any]] = None,
    nag: bool = True,
) -> cdk.App:
    """The CDK app for a spec (or a spec file), ready to synth (see `build_stacks`)."""
    return build_stacks(spec_or_path, outdir=outdir, context=context, nag=nag).app


def synthesize(spec_or_path: Union[ClusterSpec, str, Path], *, nag: bool = True) -> Dict[str, Dict[str, Any]]:
    """Stack name -> CloudFormation template of a spec, synthesized into a temporary directory. `nag` False skips
    cdk-nag's checks, which read a template and never change it (`fmcluster diff`: synth and deploy run them)."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        build_app(spec_or_path, outdir=out, nag=nag).synth()
        return {
            p.name[: -len(".template.json")]: json.loads(p.read_text())
            for p in sorted(Path(out).glob("*.template.json"))
        }
