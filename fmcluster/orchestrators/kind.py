"""The seam every orchestrator kind implements, typed end to end.

A kind is a folder under ``fmcluster/orchestrators/`` whose ``__init__`` declares one `OrchestratorKind` subclass
and instance (``KIND``), listed once in the composition root (`fmcluster.registry`):

- its traits as data, in named groups (`fmcluster.spec.cluster.OrchestratorTraits`: ``nodes``, ``validation``,
  ``storage``, then ``job_image``, ``rule_groups``, ``price_keys``), and the facts it derives from a spec (spec rules,
  extra instances, expected nodes, billed services, node units);
- how it is built: `bind` builds its CDK construct in the cluster stack from an `OrchestrationContext` and returns an
  `Orchestration` (the principal the nodes run as, and the EC2 node groups whose ids the stack outputs);
  `node_profile_json`: what the boot validator on its nodes expects;
- what it tells and writes for users: `scaffold` (``init``), `way_in`, `node_arrival`, `fabric_job`,
  `serving_endpoint`, `job_placement`;
- what it checks and describes in AWS: `preflight_checks` and `status_describers`.

These methods import their modules when called, so reading a spec never loads
CDK or boto3 code. Shared machinery comes from ``fmcluster/platforms/``, never from another kind's folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, cast

from fmcluster.spec.cluster import NodeTraits, OrchestratorTraits, StorageTraits, ValidationTraits
from fmcluster.spec.orchestrator import (
    BilledService,
    ExtraInstance,
    OrchestratorSettings,
    SpecWarning,
)

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.aws.context import PreflightCheck
    from fmcluster.aws.status import Describer
    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
    from fmcluster.platforms.kubernetes.job_placement import JobPlacement
    from fmcluster.platforms.kubernetes.load_test import ServingEndpoint
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_group import NodeGroup
    from fmcluster.spec.serving import Deployment

__all__ = ["BilledService", "ExtraInstance", "NodeTraits", "OrchestratorKind", "OrchestratorSettings", "Scaffold",
           "SpecWarning", "StorageTraits", "ValidationTraits"]

S = TypeVar("S", bound=OrchestratorSettings)


@dataclass(frozen=True)
class Scaffold:
    """What `fmcluster init` was told about a new cluster; a kind turns it into its ``orchestrator`` section.

    :param admins: IAM role or user ARNs that administer the cluster (``--admin``), where a kind has admins.
    :param ami_id: an AMI for every node (``--ami-id``), where a kind needs one built for it.
    """

    name: str
    region: str
    availability_zone: str
    group: str
    instance_type: str
    count: int
    admins: Tuple[str, ...] = ()
    ami_id: Optional[str] = None


@dataclass(frozen=True)
class OrchestratorKind(OrchestratorTraits, Generic[S]):
    """One orchestrator kind: its traits, and how it is built, checked and described."""

    def settings_of(self, spec: ClusterSpec) -> S:
        """The spec's ``orchestrator`` section, typed as this kind's settings."""
        return cast(S, self.settings.of(spec))

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        """Build the kind's construct in `scope` (the cluster stack). Its construct id becomes part of logical ids
        of deployed resources (``Default`` keeps it out of them): a kind never changes it."""
        raise NotImplementedError(f"orchestrator {self.name} builds nothing")

    def node_profile_json(self, spec: ClusterSpec, group: NodeGroup) -> str:
        """The NodeProfile (JSON) the kind ships to the group's nodes: what their boot validation expects. Default:
        the profile of a node booted from fmcluster's launch templates."""
        from fmcluster.profiles import node_profile_json

        return node_profile_json(spec, group)

    def scaffold(self, request: Scaffold) -> Dict[str, Any]:
        """The ``orchestrator`` section `fmcluster init` writes. A ValueError names the ``--flag`` a kind lacks."""
        return {"type": self.name}

    def way_in(self, spec: ClusterSpec) -> List[str]:
        """How a user reaches the deployed cluster, as commands (reading the cluster stack's outputs), a line each."""
        return []

    def node_arrival(self, spec: ClusterSpec, group: NodeGroup) -> str:
        """When the group's instances come up, in a line for the synth summary and the first job. Default: at deploy;
        a Capacity Block's launches succeed only from its start, so deploy the cluster stack after it
        (docs/capacity.md)."""
        if group.capacity.type == "capacity-block":
            return (f"launch at deploy, and only once the Capacity Block {group.capacity.reservation_id} is active: "
                    "deploy the cluster stack after it starts (fmcluster preflight says)")
        return "launch at deploy"

    def fabric_job(self, spec: ClusterSpec, group: NodeGroup, *, image: Optional[str], spec_file: str) -> Optional[str]:
        """The fabric acceptance job as this kind runs it (Kubernetes manifests); None: the Slurm or hostfile script
        `fmcluster job nccl` writes from the packaged nccl-tests.sbatch."""
        return None

    def serving_endpoint(self, spec: ClusterSpec, deployment: Deployment) -> Optional[ServingEndpoint]:
        """Where this kind serves a `serving` deployment inside the cluster (`fmcluster job serve`'s load test);
        None: the kind serves no models (docs/serving.md)."""
        return None

    def job_placement(self, spec: ClusterSpec, group: NodeGroup) -> Optional[JobPlacement]:
        """Where a Kubernetes kind puts a training job's GPU pods on `group` (namespace, queue labels, how many nodes,
        which of them); None where jobs run under Slurm or on the hosts. A ValueError says why the kind cannot place
        one for this spec."""
        return None

    def preflight_checks(self, spec: ClusterSpec) -> List[PreflightCheck]:
        """Its read-only AWS checks for `spec`, run after fmcluster's own."""
        return []

    def status_describers(self) -> Mapping[str, Describer]:
        """CloudFormation resource type -> (service called, describer) for the resources it creates."""
        return {}
