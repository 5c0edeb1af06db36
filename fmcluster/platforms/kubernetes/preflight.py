"""Preflight checks of an EKS control plane (boto3, read only), for every Kubernetes kind: the cluster quota, the
Kubernetes version in the region, the pinned add-on versions for that version (DescribeAddonVersions), an
EKS-optimized AMI's public SSM parameter, the control plane's second AZ, and the admins' IAM principals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, has_code, paginate
from fmcluster.aws.quotas import find_quota, judge
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome
from fmcluster.platforms.kubernetes.settings import control_plane_of, control_plane_zone
from fmcluster.platforms.kubernetes.versions import ADDONS, AddonPin
from fmcluster.platforms.storage import installed_csi_addons

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

# EKS user guide, "Retrieve recommended Amazon Linux AMI IDs": /aws/service/eks/optimized-ami/<k8s>/<ami type>/
# recommended/image_id. https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html
AMI_PARAMETER = "/aws/service/eks/optimized-ami/{version}/amazon-linux-2023/{arch}/{variant}/recommended/image_id"
SUPPORTED = {"STANDARD_SUPPORT", "EXTENDED_SUPPORT"}


def ami_parameter(version: str, architecture: str, gpu: bool) -> str:
    return AMI_PARAMETER.format(version=version, arch=architecture, variant="nvidia" if gpu else "standard")


def check_cluster_quota(ctx: Context) -> Outcome:
    clusters = paginate(ctx.client("eks"), "list_clusters", "clusters")
    others = [c for c in clusters if c != ctx.spec.name]
    q = find_quota(ctx, "eks", lambda n: n.strip().lower() == "clusters")
    if q is None:
        return Outcome(PASS, f"{len(others)} other cluster(s); no 'Clusters' quota found by name", "1 more cluster")
    return judge(1, len(others), float(q["Value"]), "", "clusters", q["QuotaName"], " (looked up by name)")


def check_version(ctx: Context) -> Outcome:
    version = control_plane_of(ctx.spec).kubernetes_version
    found = ctx.client("eks").describe_cluster_versions(clusterVersions=[version]).get("clusterVersions", [])
    if not found:
        return Outcome(FAIL, f"EKS in {ctx.region} does not offer Kubernetes {version}", "offered",
                       "choose another orchestrator.eks.kubernetes_version")
    v = found[0]
    status = v.get("versionStatus") or v.get("status", "?")
    end = v.get("endOfStandardSupportDate")
    observed = f"{version}: {status}" + (f", standard support until {str(end)[:10]}" if end else "")
    if status not in SUPPORTED and str(status).upper() not in SUPPORTED:
        return Outcome(FAIL, observed, "standard or extended support", "choose a supported kubernetes_version")
    if "EXTENDED" in str(status).upper():
        return Outcome(WARN, observed, "standard support", "extended support costs more per cluster-hour: upgrade")
    return Outcome(PASS, observed, "standard support")


def addon_versions(ctx: Context, name: str, kubernetes_version: str) -> Dict[str, bool]:
    """Versions of add-on `name` EKS offers for `kubernetes_version` -> whether it is the default one."""
    offered: Dict[str, bool] = {}
    for a in paginate(ctx.client("eks"), "describe_addon_versions", "addons", addonName=name,
                      kubernetesVersion=kubernetes_version):
        for av in a.get("addonVersions", []):
            offered[av.get("addonVersion", "")] = any(c.get("defaultVersion") for c in av.get("compatibilities", []))
    return offered


def installed_addons(spec: ClusterSpec, addons: Mapping[str, AddonPin] = ADDONS) -> Dict[str, AddonPin]:
    """`addons` and the CSI add-on of every store the cluster installs one for (on every cluster, or where the spec
    configures the store: `CsiAddon`, read off the registered stores), at the store's pins; a kind's own pin of the same
    add-on wins."""
    found = {a.name: AddonPin(a.name, dict(a.versions), a.source) for a in installed_csi_addons(spec)}
    return {**found, **addons}


def check_addons(ctx: Context, addons: Mapping[str, AddonPin] = ADDONS) -> Outcome:
    version = control_plane_of(ctx.spec).kubernetes_version
    missing, seen = [], []
    for addon in installed_addons(ctx.spec, addons).values():
        offered = addon_versions(ctx, addon.name, version)
        pinned = addon.version_for(version)
        if not offered:
            missing.append(f"{addon.name} (not offered for {version})")
        elif pinned and pinned not in offered:
            missing.append(f"{addon.name} {pinned}")
        else:
            default_version = next((v for v, d in offered.items() if d), "?")
            seen.append(f"{addon.name} {pinned or default_version + ' (default)'}")
    if missing:
        return Outcome(FAIL, "not offered: " + ", ".join(missing), f"every add-on for Kubernetes {version}",
                       "update the pins in fmcluster/platforms/kubernetes/versions.py, the kind's versions.py or "
                       "the store's CsiAddon (aws eks describe-addon-versions)")
    return Outcome(PASS, "; ".join(seen), f"every add-on for Kubernetes {version}")


def check_ami_parameter(ctx: Context, name: str) -> Outcome:
    ssm = ctx.client("ssm")
    try:
        value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except Exception as exc:  # noqa: BLE001 - a missing parameter is the answer
        if "ParameterNotFound" in str(exc):
            return Outcome(FAIL, f"{name} not found in {ctx.region}", "the EKS-optimized AMI's parameter",
                           "EKS publishes no such AMI for this version/architecture in the Region")
        raise
    return Outcome(PASS, f"{value}", "an AMI id")


def _second_az_field(spec: ClusterSpec) -> str:
    if spec.network.new_vpc is not None:
        return "network.new_vpc.second_availability_zone"
    return "orchestrator.eks.control_plane_availability_zone (and existing_vpc.extra_subnet_ids)"


def check_second_az(ctx: Context) -> Outcome:
    zone = control_plane_zone(ctx.spec)
    zones = ctx.client("ec2").describe_availability_zones(
        Filters=[{"Name": "zone-name", "Values": [zone]}]).get("AvailabilityZones", [])
    if not zones:
        return Outcome(FAIL, f"{zone} not in {ctx.region} for this account", "an available AZ",
                       f"set {_second_az_field(ctx.spec)} to an AZ of the Region")
    state = zones[0].get("State", "?")
    if state != "available":
        return Outcome(FAIL, f"{zone} {state}", "available", f"pick another AZ in {_second_az_field(ctx.spec)}")
    return Outcome(PASS, f"{zone} ({zones[0].get('ZoneId', '?')}) available", "available")


def check_admins(ctx: Context) -> Outcome:
    """Every admin ARN names an IAM role or user that exists in this account. The spec only checks the ARN's shape;
    an access entry for a principal that does not exist fails the deploy after the control plane (about ten minutes
    in), and one in another account is not checked here (it cannot be read from this one)."""
    admins = control_plane_of(ctx.spec).admins
    if not admins:
        return Outcome(PASS, "no admins listed", "each admin an existing role or user of this account")
    iam = ctx.client("iam")
    found: List[str] = []
    missing: List[str] = []
    foreign: List[str] = []
    for arn in admins:
        account, resource = arn.split(":", 5)[4], arn.split(":", 5)[5]
        kind, _, path_and_name = resource.partition("/")
        name = path_and_name.rsplit("/", 1)[-1]
        if ctx.account and account != ctx.account:
            foreign.append(arn)
            continue
        try:
            if kind == "role":
                iam.get_role(RoleName=name)
            else:
                iam.get_user(UserName=name)
            found.append(arn)
        except ClientError as e:
            if not has_code(e, "NoSuchEntity"):
                raise
            missing.append(arn)
    expected = "each admin an existing role or user of this account"
    observed = f"{len(found)} of {len(admins)} found" + (f"; missing: {', '.join(missing)}" if missing else "") \
        + (f"; other account: {', '.join(foreign)}" if foreign else "")
    if missing:
        return Outcome(FAIL, observed, expected, "create the role or user, or correct orchestrator.eks.admins")
    if foreign:
        return Outcome(WARN, observed, expected, "an admin of another account cannot be checked from this one; make "
                       "sure it exists, or use a role of this account")
    return Outcome(PASS, observed, expected)
