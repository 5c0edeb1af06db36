"""What an orchestrator kind is, said once as data: the one seam every kind implements.

A kind is a folder under ``fmcluster/orchestrators/`` whose ``__init__`` declares an `OrchestratorKind`:

- its settings, a pydantic model with ``type: Literal["<kind>"]`` (the spec's ``orchestrator`` section;
  the spec joins every kind's model into a union discriminated by ``type``);
- facts as data: the node agent the nodes run (`NODE_AGENTS`), the capacity types it accepts, whether its
  instances run in this account (EC2 quotas) or a service's, the extra instances it runs (login, controller);
- its spec rules, run after the spec's own (field paths are from the spec's top, e.g. ``node_groups[0].ami_id``);
- where its CDK construct, preflight checks and status describers live, as ``module:attribute`` references,
  imported only by the layer that needs them (the spec never imports CDK or boto3 code).

Nothing outside the folder branches on a kind's name: the spec, the cluster stack, profiles, quotas, preflight
and status ask the kind.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Optional, Tuple, Type

from fmcluster.runtime.contract import NODE_AGENTS
from fmcluster.runtime.profile import POLICIES as VALIDATION_POLICIES
from fmcluster.spec.base import Problem, SpecModel

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

class OrchestratorSettings(SpecModel):
    """The spec's ``orchestrator`` section. Each kind subclasses it with ``type: Literal["<kind>"]``."""

    type: str


@dataclass(frozen=True)
class ExtraInstance:
    """An instance the orchestrator runs beside the node groups (login node, controller)."""

    role: str
    instance_type: str  # as the service names it (``ml.`` prefixed for SageMaker HyperPod)
    count: int = 1


def no_rules(spec: ClusterSpec) -> List[Problem]:
    return []


def no_extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    return []


def no_extra_availability_zones(spec: ClusterSpec) -> List[str]:
    return []


def node_group_counts(spec: ClusterSpec) -> Dict[str, int]:
    """Every node of every group runs: each group's count."""
    return {g.name: g.count for g in spec.node_groups}


def no_plan_notes(spec: ClusterSpec) -> List[str]:
    return []


@dataclass(frozen=True)
class OrchestratorKind:
    """One orchestrator kind.

    :param name: the value of ``orchestrator.type``.
    :param summary: one line for the schema and the docs.
    :param settings: the pydantic model of its ``orchestrator`` section.
    :param node_agent: ``slurm`` | ``kubernetes`` | None: what the boot validator's drain or taint waits for.
    :param capacity_types: the node groups' ``capacity.type`` values it accepts.
    :param construct: ``module:Class`` of its CDK construct, built as ``Class(scope, construct_id, context=...)``
        by the cluster stack (see `fmcluster.orchestrators.context`); it exposes ``grantee``.
    :param construct_id: the construct's id in the cluster stack. Logical ids of deployed clusters depend on it:
        ``Default`` keeps the construct out of them.
    :param instances_in_account: its instances run in this account, so EC2 On-Demand quotas apply (HyperPod's run
        in a SageMaker service account and use SageMaker quotas instead).
    :param uses_image_family: node groups boot from fmcluster's launch templates, so ``image_family`` decides their
        root device and default image (False where the service picks the image: HyperPod, ParallelCluster).
    :param spec_rules: problems a spec has with this kind, as (field path, message).
    :param extra_instances: instances it runs beside the node groups (quotas, ``plan``).
    :param extra_availability_zones: availability zones besides the GPU AZ where the network stack gives the kind a
        small private subnet each (an EKS control plane and the AMP managed scraper need subnets in two AZs).
    :param addresses_per_node: VPC addresses each node takes beyond its IP-consuming interfaces (pod addresses
        under the VPC CNI); the spec sizes the node subnet with them.
    :param expected_nodes: node group name -> how many of its nodes are expected to be up and reporting, which
        the inventory alerts (``NodeGroupBelowExpected``) compare with the nodes that report. Default: the count.
        A kind whose nodes start only for jobs and stop when idle expects only those that always run; a group
        left out expects its count.
    :param preflight: ``module:function`` returning its preflight checks for a spec, or None.
    :param status: ``module:MAPPING`` of CloudFormation resource type to status describer, or None.
    :param plan_notes: lines ``fmcluster plan`` prints about the orchestrator (node counts it runs, what it builds
        that CloudFormation cannot).
    :param validation_policies: what a failed boot validation may do on its nodes (``validation.policy``), its
        default first; the spec refuses the others.
    :param validation_policy_note: why the policies it does not take do not apply (said when the spec asks for one).
    :param rule_groups: extra alert rule files the observability stack adds for this kind, by name:
        ``fmcluster/observability/rules.<name>.yaml`` (rules on metrics only this kind produces).
    """

    name: str
    summary: str
    settings: Type[OrchestratorSettings]
    node_agent: Optional[str]
    capacity_types: FrozenSet[str]
    construct: str
    construct_id: str = "Default"
    instances_in_account: bool = True
    uses_image_family: bool = True
    spec_rules: Callable[[ClusterSpec], List[Problem]] = no_rules
    extra_instances: Callable[[ClusterSpec], List[ExtraInstance]] = no_extra_instances
    extra_availability_zones: Callable[[ClusterSpec], List[str]] = no_extra_availability_zones
    addresses_per_node: int = 0
    expected_nodes: Callable[[ClusterSpec], Dict[str, int]] = node_group_counts
    preflight: Optional[str] = None
    status: Optional[str] = None
    plan_notes: Callable[[ClusterSpec], List[str]] = no_plan_notes
    rule_groups: Tuple[str, ...] = ()
    validation_policies: Tuple[str, ...] = ("drain", "fail", "report")
    validation_policy_note: str = ""

    def __post_init__(self) -> None:
        if self.node_agent is not None and self.node_agent not in NODE_AGENTS:
            raise ValueError(f"node_agent: {self.node_agent!r} is not one of {', '.join(NODE_AGENTS)} or None")
        if not self.validation_policies or set(self.validation_policies) - set(VALIDATION_POLICIES):
            raise ValueError(f"validation_policies: {self.validation_policies!r} must name some of "
                             f"{', '.join(VALIDATION_POLICIES)}")
        declared = self.settings.model_fields["type"].annotation
        if getattr(declared, "__args__", None) != (self.name,):
            raise ValueError(f"settings: {self.settings.__name__}.type must be Literal[{self.name!r}]")


def load(reference: str) -> Any:
    """The object a ``module:attribute`` reference names (imported on first use)."""
    module, _, attribute = reference.partition(":")
    if not module or not attribute:
        raise ValueError(f"{reference!r} is not module:attribute")
    return getattr(importlib.import_module(module), attribute)
