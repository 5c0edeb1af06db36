"""From resource changes to consequences: data, nodes, control plane, capacity, safe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.diff import groups, kubernetes, nodes, pcluster, refusals, schemas, serving, storage
from fmcluster.diff.changes import ADDED, MODIFIED, REMOVED, REPLACED, ExportChange, ResourceChange, Template, compare_stacks
from fmcluster.diff.findings import CAPACITY, CLASSES, CONTROL_PLANE, DATA, NODES, SAFE, Finding

# what holds data whatever the store (the data bucket, keys); the stores add their own types (storage.stateful_types)
STATEFUL = ("AWS::S3::Bucket", "AWS::KMS::Key")
CONTROL = ("AWS::EKS::Cluster", "AWS::PCS::Cluster", "AWS::PCS::Queue", "AWS::SageMaker::Cluster",
           "Custom::PclusterCluster", "AWS::CloudFormation::Stack")
SHARED_NETWORK = ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::SecurityGroup")
IN_CLUSTER = ("Custom::AWSCDK-EKS-HelmChart", "Custom::AWSCDK-EKS-KubernetesResource", "Custom::GitHelmChart")
_GROUP_PATHS = {"AWS::SageMaker::Cluster": ("InstanceGroups",),
                "Custom::PclusterCluster": ("ClusterConfiguration", "Scheduling", "SlurmQueues")}
CFN_EXPORTS = "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-stack-exports.html"
PLACEMENT_GROUP_DELETE = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeletePlacementGroup.html"
PLACEMENT_GROUP_CREATE = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html"
# What in a spec changes a subnet's CIDR or AZ (docs/network.md): neither the orchestrator nor the node counts do.
SUBNET_CAUSES = ("A new CIDR or AZ comes from network.new_vpc.cidr, node_subnet_prefix, second_availability_zone or "
                 "availability_zone, or from a cluster deployed by a release that sized the node subnet per "
                 "orchestrator and count: pin node_subnet_prefix to the deployed size (docs/network.md)")
# The metadata under which the runtime bucket's deployment carries the groups' boot pointers (the constructs layer's
# node_bootstrap.POINTERS_METADATA; a test holds the two equal).
BOOT_POINTERS = "fmcluster:boot-pointers"


@dataclass
class Report:
    stacks: Dict[str, List[ResourceChange]]
    findings: List[Finding]
    exports: List[ExportChange] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def classes(self) -> List[str]:
        """The classes present, most severe first."""
        present = {f.cls for f in self.findings}
        return [c for c in CLASSES if c in present]

    @property
    def deploy_fails(self) -> bool:
        """CloudFormation or a service refuses part of the update: the deploy fails and rolls back."""
        return any(f.fails for f in self.findings)

    @property
    def gpus_affected(self) -> int:
        return sum(f.gpus for f in self.findings if f.cls == NODES)


def _paths(c: ResourceChange) -> str:
    shown = [".".join(p) for p in c.paths[:4]]
    return ", ".join(shown) + (f" and {len(c.paths) - 4} more" if len(c.paths) > 4 else "")


def _stateful(c: ResourceChange) -> Finding:
    if c.action == REMOVED:
        policy = c.policy("DeletionPolicy")
        fate = ("kept in the account, detached from the stack (DeletionPolicy Retain)" if policy.startswith("Retain")
                else "deleted after a final snapshot (DeletionPolicy Snapshot)" if policy == "Snapshot"
                else f"deleted with its data (DeletionPolicy {policy})")
        return Finding(DATA, c.where, f"{c.type} removed: {fate}")
    said = storage.replaced(c)
    if said is not None:
        return said
    policy = c.policy("UpdateReplacePolicy")
    fate = ("the old one is kept, detached (UpdateReplacePolicy Retain); the cluster gets a new, empty one"
            if policy.startswith("Retain") else "the old one is deleted after a final snapshot; the cluster gets a new, "
            "empty one" if policy == "Snapshot" else f"the old one is deleted with its data (UpdateReplacePolicy {policy})")
    return Finding(DATA, c.where, f"{c.type} replaced ({'; '.join(c.because)}): {fate}")


# Slurm settings naming a script every node runs: slurmd drains a node on which the Prolog path matches nothing
# (docs/observability.md), and a node booted before the change may not have the script.
NODE_SCRIPTS = ("Prolog", "Epilog", "HealthCheckProgram")


def _slurm_scripts(resource: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    props = (resource or {}).get("Properties") or {}
    custom = (props.get("SlurmConfiguration") or {}).get("SlurmCustomSettings") or []
    return {str(s.get("ParameterName")): s.get("ParameterValue") for s in custom
            if isinstance(s, dict) and s.get("ParameterName") in NODE_SCRIPTS}


def _new_node_scripts(c: ResourceChange) -> str:
    """What a PCS cluster update asks of running nodes: scripts Slurm now runs on them."""
    if c.type != "AWS::PCS::Cluster" or c.action != MODIFIED:
        return ""
    old, new = _slurm_scripts(c.old), _slurm_scripts(c.new)
    changed = sorted(k for k, v in new.items() if old.get(k) != v)
    if not changed:
        return ""
    return (f". Slurm now runs {', '.join(f'{k}={new[k]}' for k in changed)} on every node: a node booted before "
            "this change must already have the script, or slurmd drains it; roll the nodes first (docs/observability.md)")


def _control(c: ResourceChange) -> Finding:
    unknown = "" if c.replacement_known else (
        "; whether this replaces it is the provider's decision, which fmcluster diff cannot know" +
        ("; `pcluster update-cluster --dryrun` applies ParallelCluster's own update policies"
         if c.type == "Custom::PclusterCluster" else "") +
        ("; a nested stack is compared by its parameters and template URL only" if c.type == "AWS::CloudFormation::Stack"
         else ""))
    verb = {REPLACED: f"replaced ({'; '.join(c.because)})", REMOVED: "removed", ADDED: "created",
            MODIFIED: f"updated in place: {_paths(c)}"}[c.action]
    return Finding(CONTROL_PLANE, c.where, f"{c.type} {verb}{unknown}{_new_node_scripts(c)}")


def _auto_deleted_buckets(templates: Dict[str, Template]) -> set:
    """Buckets CDK empties on deletion (autoDeleteObjects): they hold only what the stack itself put there."""
    found = set()
    for stack, t in templates.items():
        for r in t.get("Resources", {}).values():
            bucket = (r.get("Properties") or {}).get("BucketName")
            if r.get("Type") == "Custom::S3AutoDeleteObjects" and isinstance(bucket, dict) and "Ref" in bucket:
                found.add(f"{stack}/{bucket['Ref']}")
    return found


@dataclass
class _Context:
    """What judging one change needs to know of the others."""

    consumed_templates: set  # launch templates a node group consumes (their changes are the group's)
    scratch_buckets: set  # buckets CDK empties on deletion
    refused: Dict[str, Finding]  # replacements a store's service refuses, by place
    moved_zones: bool  # a subnet moves to another Availability Zone
    moved_names: Dict[str, str] = field(default_factory=dict)  # added resources that keep a removed one's name


def _stateful_one(c: ResourceChange, ctx: _Context) -> Finding:
    if c.where in ctx.refused:
        return ctx.refused[c.where]
    name = refusals.custom_name(c.type, c.old, c.new) if c.action == REPLACED else None
    if name is not None:
        return Finding(DATA, c.where, f"{c.type} replaced ({'; '.join(c.because)}): {refusals.refusal(c.type, name)}",
                       sources=[refusals.NAME_TYPE], fails=True)
    return _stateful(c)


def _one(c: ResourceChange, ctx: _Context) -> List[Finding]:
    if c.where in ctx.moved_names:
        return [Finding(CONTROL_PLANE, c.where, ctx.moved_names[c.where], sources=[refusals.NAME_TYPE], fails=True)]
    stateful = STATEFUL + storage.stateful_types()
    if c.type in stateful and c.action in (REMOVED, REPLACED) and c.where in ctx.scratch_buckets:
        return [Finding(SAFE, c.where, f"{c.type} {c.action}: a bucket of deployment artifacts the stack empties "
                                       "on deletion (autoDeleteObjects), no user data")]
    if c.type in stateful and c.action in (REMOVED, REPLACED):
        return [_stateful_one(c, ctx)]
    if c.type in groups.node_types() and c.type not in CONTROL:
        return []  # node groups: nodes.findings
    if c.type in CONTROL:
        judged = kubernetes.cluster_version(c) + kubernetes.subnets(c, ctx.moved_zones)
        group = _GROUP_PATHS.get(c.type)
        if c.action == MODIFIED and group and all(p[:len(group)] == group for p in c.paths):
            return judged  # only its groups changed: nodes.findings
        name = refusals.custom_name(c.type, c.old, c.new) if c.action == REPLACED else None
        if name is not None:
            return judged + [Finding(CONTROL_PLANE, c.where, f"{c.type} replaced ({'; '.join(c.because)}): "
                                     f"{refusals.refusal(c.type, name)}", sources=[refusals.NAME_TYPE], fails=True)]
        if judged and c.action == MODIFIED and all(p[:1] in (("Version",), ("ResourcesVpcConfig",)) for p in c.paths):
            return judged
        return judged + [_control(c)]
    if c.type == "AWS::EC2::Subnet" and c.action == REPLACED:
        return [Finding(CONTROL_PLANE, c.where, f"{c.type} replaced ({_paths(c)}): every instance and interface in it "
                        f"moves to the new subnet. {SUBNET_CAUSES}")]
    if c.type in SHARED_NETWORK and c.action in (REMOVED, REPLACED):
        return [Finding(CONTROL_PLANE, c.where, f"{c.type} {c.action}: what runs in or behind it follows")]
    if c.type == "AWS::EC2::PlacementGroup" and c.action == REPLACED:
        return [Finding(NODES, c.where, "placement group replaced: instances in the old group stay where they are, new "
                        "launches go to the new one (cluster placement is lost between them), and CloudFormation "
                        "cannot delete the old group while instances are in it (its clean-up fails and leaves it)",
                        sources=[PLACEMENT_GROUP_DELETE])]
    if c.type == "AWS::EC2::LaunchTemplate":
        if c.where in ctx.consumed_templates:
            return []
        return [Finding(SAFE, c.where, f"launch template {c.action}: instances already launched from it keep running; "
                                       "new launches use the new version")]
    pointers = _boot_pointers(c)
    if pointers is not None:
        return [pointers]
    if c.type in IN_CLUSTER:
        return kubernetes.scheduler(c) or serving.findings(c) or [
            Finding(SAFE, c.where, f"{c.type} {c.action}: applied inside the cluster by CDK's kubectl provider; which "
                                   "pods restart is not computed")]
    detail = f": {_paths(c)}" if c.action in (MODIFIED, REPLACED) and c.paths else ""
    judged = storage.modified(c)
    name = refusals.custom_name(c.type, c.old, c.new) if c.action == REPLACED else None
    if name is not None:
        judged.append(Finding(CONTROL_PLANE, c.where, f"{c.type} replaced{detail}: {refusals.refusal(c.type, name)}",
                              sources=[refusals.NAME_TYPE], fails=True))
    return judged or [Finding(SAFE, c.where, f"{c.type} {c.action}{detail}")]


def _placement_in_moved_zone(old: Dict[str, Template], stacks: Dict[str, List[ResourceChange]]) -> List[Finding]:
    """A cluster placement group lives in one Availability Zone: nodes cannot follow the subnet into another while
    the group still holds instances in the first."""
    out = []
    for stack, t in old.items():
        for lid, r in t.get("Resources", {}).items():
            if r.get("Type") == "AWS::EC2::PlacementGroup" and (r.get("Properties") or {}).get("Strategy") == "cluster":
                out.append(Finding(NODES, f"{stack}/{lid}", "the node subnet moves to another Availability Zone, and a "
                                   "cluster placement group is confined to one: instances cannot launch into it in the "
                                   "new zone while it holds instances in the old one. Way through: remove the node "
                                   "groups first (their instances are terminated), then deploy the move and add them "
                                   "back", sources=[PLACEMENT_GROUP_CREATE]))
    return out


def _boot_pointers(c: ResourceChange) -> Optional[Finding]:
    """The groups' boot pointers rewritten: what nodes launched from now on read; running nodes are untouched."""
    old, new = (((r or {}).get("Metadata") or {}).get(BOOT_POINTERS) or {} for r in (c.old, c.new))
    if not old and not new:
        return None
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if not changed:
        return Finding(SAFE, c.where, f"boot pointers' deployment {c.action}; what the pointers say is unchanged")
    what = sorted({field for k in changed for field in ("runtime", "level", "policy", "profile", "reports")
                   if (old.get(k) or {}).get(field) != (new.get(k) or {}).get(field)})
    groups = ", ".join(k.rsplit("/", 1)[-1].removesuffix(".json") for k in changed)
    return Finding(SAFE, c.where, f"boot pointers rewritten for {groups} ({', '.join(what)}): nodes launched from now "
                                  "on read them; running nodes keep what they booted with (docs/changes.md)")


def _export(e: ExportChange) -> Finding:
    importers = ", ".join(e.importers)
    return Finding(CONTROL_PLANE, f"{e.stack} export {e.name}",
                   f"export {e.action} while {importers} import(s) it: CloudFormation refuses to change or remove an "
                   f"export in use, so deploy in this order: 1. update or destroy {importers} so nothing imports it, "
                   f"2. deploy {e.stack}, 3. deploy {importers}", sources=[CFN_EXPORTS])


def compare(old: Dict[str, Template], new: Dict[str, Template], *, region: str = "us-east-1",
            decided: Optional[Dict[Tuple[str, str], str]] = None) -> Report:
    """What deploying `new` over `old` (stack name -> template, as `fmcluster.app.synthesize` gives) does.
    `decided` carries a change set's Replacement per (stack, logical id) when deployed stacks are compared."""
    stacks, exports = compare_stacks(old, new, region=region, decided=decided)
    old_units = {k: u for s, t in old.items() for k, u in groups.units(s, t).items()}
    new_units = {k: u for s, t in new.items() for k, u in groups.units(s, t).items()}
    consumed = {f"{u.stack}/{u.launch_template}" for u in list(old_units.values()) + list(new_units.values())
                if u.launch_template}
    every = [c for changes in stacks.values() for c in changes]
    moved = any(c.type == "AWS::EC2::Subnet" and c.action == REPLACED and ("AvailabilityZone",) in c.paths
                for c in every)
    ctx = _Context(consumed, _auto_deleted_buckets(old), storage.refused(every), moved, refusals.moved(every))
    found: List[Finding] = []
    for c in every:
        found.extend(_one(c, ctx))
    named = {c.where: name for c in every if c.action == REPLACED
             for name in [refusals.custom_name(c.type, c.old, c.new)] if name is not None}
    found.extend(nodes.findings(old_units, new_units, stacks, named))
    pcluster.apply(every, old_units, found)
    if moved:
        found.extend(_placement_in_moved_zone(old, stacks))
    found.extend(_export(e) for e in exports)
    said = {f.where.split("/")[0] + "/" + f.where.split("/")[1] for f in found if f.where.count("/") >= 1}
    found.extend(Finding(SAFE, c.where, f"{c.type} {c.action}: {_paths(c)}") for c in every
                 if c.where not in said and c.action == MODIFIED)  # every change is listed, at least as safe
    notes = []
    if not schemas.available():
        notes.append("cfn-lint's resource provider schemas are not installed: replacement is judged only from the "
                     "documented facts fmcluster carries; install cfn-lint for CloudFormation's create-only rules")
    if any(c.type.startswith("Custom::") and c.action != ADDED for cs in stacks.values() for c in cs):
        notes.append("custom resources (ParallelCluster, kubectl manifests, Helm charts) are compared by their "
                     "properties; what their provider does with a change is reported only where documented")
    order = {DATA: 0, NODES: 1, CONTROL_PLANE: 2, CAPACITY: 3, SAFE: 4}
    found.sort(key=lambda f: (order[f.cls], f.where))
    return Report(stacks, found, exports, notes)
