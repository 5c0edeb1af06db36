"""The storage seam: what a shared store hands every orchestrator kind (`Mount`), and what a store declares (`Store`).

A store is a folder under ``fmcluster/platforms/storage/`` whose ``__init__`` declares one `Store` subclass and
instance (``STORE``), listed once in the composition root (`fmcluster.registry`). The storage stack asks every
registered store the spec configures to build its resources there (stateful: retained, logical ids pinned) and gets
back a `BuiltStore`: the store's `Mount`, its stack outputs and exports, and its alarms. The cluster stack hands the
kind every mount (`Mounts`, ``OrchestrationContext.mounts``), and a kind consumes a mount through these forms only,
never by the store's name:

- ``boot`` (`BootMount`): the shell lines a node's boot script runs (EC2 user data, login nodes): install the
  client where the node's image lacks it, mount, add to fstab; a failed mount is judged by ``validation.policy``.
- ``kubernetes`` (`KubernetesVolume`): a static PersistentVolume and its ReadWriteMany claim, served by the CSI
  driver an EKS add-on installs (`CsiAddon`, declared by the store).
- ``services``: service-native forms, keyed by service (`HYPERPOD`, `PARALLELCLUSTER`, `HYPERPOD_INFERENCE`), each
  as that service writes it: what the service mounts itself (HyperPod's ``InstanceStorageConfigs`` entry,
  ParallelCluster's ``SharedStorage`` entry, the HyperPod Inference Operator's model source). A mount without a
  service's form is mounted by the nodes instead (the operator then reads no model from it).
- ``lifecycle``: the store's entry in HyperPod's lifecycle parameters, under the store's ``lifecycle_key`` (the node
  scripts mount it). HyperPod's nodes mount a store without one from its boot form instead (the parameters' list of
  mounts: fmcluster/platforms/hyperpod/mounts.py).
- ``node_permissions``: IAM the nodes' principal needs to reach the data (the cluster stack grants them with the data
  bucket).

Plain data, no CDK type: values may be CDK tokens (strings that resolve at deploy time), so the spec, the planner and
tests read the contract without loading CDK. The forms themselves (`Mount` and the rest) live in ``forms.py`` and the
services' names in ``services.py``, so that reading a spec builds only the declarations here.
docs/architecture.md ("The storage seam") has the whole picture and how a second store (Mountpoint for Amazon S3)
fills each form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple, Type

from fmcluster.platforms.storage.services import HYPERPOD, HYPERPOD_INFERENCE, PARALLELCLUSTER, SERVICES

if TYPE_CHECKING:
    from aws_cdk import Stack
    from aws_cdk import aws_iam as iam

    from fmcluster.platforms.storage.forms import (
        BuiltStore,
        Judgement,
        KubernetesVolume,
        Mount,
        Permission,
        S3Link,
        StorageScope,
    )
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.storage import StoreSettings

__all__ = ["ChangeRules", "CsiAddon", "HYPERPOD", "HYPERPOD_INFERENCE", "installed_csi_addons", "Mounts",
           "PARALLELCLUSTER", "ResourceEdit", "SERVICES", "Store", "StoreFigures"]


@dataclass(frozen=True)
class CsiAddon:
    """The EKS add-on that installs a store's CSI driver.

    :param service_account: the add-on's service account that gets a Pod Identity role with the drivers'
        permissions (`KubernetesVolume.driver_permissions` of the mounts it serves).
    :param always: installed on every Kubernetes cluster, mounted or not (for a driver that always has been:
        removing it from clusters without the store is a change of its own); False: only with a mount that uses it.
    :param versions: Kubernetes version -> the add-on version pinned (absent: EKS's default for the cluster's version),
        and ``source`` where the pins come from, for an add-on the Kubernetes platform's own table
        (platforms/kubernetes/versions.py ``ADDONS``) does not pin.
    :param node_millicores: the CPU its node plugin's DaemonSet requests on every node (all its containers), which a
        kind that sizes a job's pods to the node leaves free; ``node_source`` where the figure comes from.
    """

    name: str
    service_account: str
    always: bool = False
    versions: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    node_millicores: int = 0
    node_source: str = ""


class ResourceEdit(Protocol):
    """A change to one resource of a template, as ``fmcluster diff`` hands it to a store (its ``ResourceChange``):
    ``action`` is added, removed, modified or replaced; ``paths`` the property paths that differ; ``old``/``new`` the
    resource as each template declares it."""

    type: str
    logical_id: str
    action: str
    paths: List[Tuple[str, ...]]
    because: List[str]
    old: Optional[Dict[str, Any]]
    new: Optional[Dict[str, Any]]

    @property
    def where(self) -> str: ...

    def policy(self, name: str) -> str: ...


class ChangeRules:
    """How ``fmcluster diff`` judges changes to a store's resources; the defaults say nothing beyond CloudFormation's
    own rules (docs/changes.md, "Shared storage").

    :cvar stateful: resource types that hold the store's data: replacing or removing one is a data finding.
    :cvar create_only: (type, property path) -> the CloudFormation reference page that says "Update requires:
        Replacement" where the provider schema does not list the path as create-only.
    """

    stateful: Tuple[str, ...] = ()
    create_only: Mapping[Tuple[str, Tuple[str, ...]], str] = {}

    def modified(self, edit: ResourceEdit) -> List[Judgement]:
        """What updating one of its resources in place does (an interruption, a refusal)."""
        return []

    def replaced(self, edit: ResourceEdit) -> Optional[Judgement]:
        """What replacing one of its stateful resources does, where the generic words (the old one kept or deleted)
        would mislead; None: the generic words."""
        return None

    def refused(self, edits: Sequence[ResourceEdit]) -> Dict[str, Judgement]:
        """The replacements the service refuses given every change of the deploy, by ``where``."""
        return {}


class StoreFigures:
    """What ``fmcluster plan`` and ``fmcluster diagram`` say of a store, computed from its section by its folder's
    figures.py, with its price and throughput data (and their sources) beside it; `Store.figures` imports it on call.
    The planner loops over the registered stores and never names one. Each method gets ``kit``, the planner's own
    helpers (``fig``/``val``: a figure with its formula and inputs; ``plain``, ``human_bytes``, ``percent``, ``money``,
    ``escape``; ``regional``: a region's price or us-east-1's as an estimate; ``arrows``; ``GB``), so a store imports
    nothing of the planner (fmcluster/planner/stores.py). The defaults say nothing: a store without figures is left
    out of the plan.

    :cvar summarised: the plan's cluster figures carry its key (null where the spec does not configure it), and its
        ``stream`` is the data path's verdict.
    :cvar short: how a report's sentence names it ("of <short>'s throughput").
    :cvar unbilled: what it bills by use that the plan's cost leaves out (its "not included" words).
    :cvar formulas: the formulas of its summary's figures, by figure (the plan lists them as ``<key>.<figure>``).
    :cvar target, export_target: the names of its checkpoint targets that the shared file system's tier writes to
        and copies on to S3 through (the instance NVMe's tier copies to ``target`` too).
    """

    summarised: bool = False
    short: str = ""
    unbilled: Tuple[str, ...] = ()
    formulas: Mapping[str, str] = {}
    target: str = ""
    export_target: str = ""

    def summary(self, spec: ClusterSpec, section: Any, kit: Any) -> Dict[str, Any]:
        """What the spec's section buys (the plan's ``cluster.storage.<key>``)."""
        return {}

    def summary_lines(self, summary: Mapping[str, Any], kit: Any) -> List[str]:
        """`summary` as the text report's lines."""
        return []

    def summary_html(self, summary: Mapping[str, Any], kit: Any) -> str:
        """`summary` as the HTML page's paragraphs."""
        return ""

    def charges(self, spec: ClusterSpec, section: Any, kit: Any) -> List[Dict[str, Any]]:
        """Its cost lines: ``item``, ``detail``, ``usd_per_month`` (None: unpriced), ``entry`` (its price data:
        ``status``, ``source``, ``usage``), ``notes``, and the ``formula`` of the monthly figure with its ``inputs``."""
        return []

    def checkpoint_targets(self, spec: ClusterSpec, section: Any, size: float, group: Any, steps: Any,
                           kit: Any) -> List[Dict[str, Any]]:
        """Writing one checkpoint of `size` bytes from `group`'s nodes to it and restoring it (``section`` None:
        what a spec without it is told, or a comparison); ``steps(seconds)``: a write time in training steps."""
        return []

    def checkpoint_fits(self, spec: ClusterSpec, section: Any, need: float) -> List[Dict[str, Any]]:
        """Whether `need` bytes (``keep`` checkpoints) fit on it beside what else it holds."""
        return []

    def checkpoint_cost(self, spec: ClusterSpec, section: Any, size: float, keep: int, interval_minutes: int,
                        kit: Any) -> List[Dict[str, Any]]:
        """What `keep` checkpoints on it, one every `interval_minutes`, cost a month, per storage class."""
        return []

    def capacity_billing(self, spec: ClusterSpec, section: Any) -> Optional[str]:
        """How it bills the checkpoints it holds where that is not by use (a summarised store's words beside a
        by-use store's monthly cost; None: by use)."""
        return None

    def stream(self, spec: ClusterSpec, section: Any, bytes_per_s: float, group: Any, kit: Any) -> Dict[str, Any]:
        """What it delivers to the input pipeline against the `bytes_per_s` a step needs, as the plan's data path
        files it (empty: not judged)."""
        return {}

    def stream_lines(self, data_path: Mapping[str, Any], kit: Any) -> List[str]:
        """Its part of the plan's data path (what `stream` filed) as report lines (a summarised store's verdict is
        the planner's own sentence)."""
        return []

    def checkpoint_cost_lines(self, checkpoint: Mapping[str, Any], kit: Any) -> List[str]:
        """Its part of the plan's checkpoint figures (what `checkpoint_cost` gave) as report lines."""
        return []

    def diagram(self, spec: ClusterSpec, section: Any, graph: Any, kit: Any) -> None:
        """Draw it in the cluster diagram: ``graph.vpc`` and ``graph.top`` (Graphviz graphs), ``graph.anchors`` (each
        node group's (node, cluster, efa, Gbps)), ``graph.bucket`` (the data bucket's node), ``graph.data_bucket``
        (its name) and ``graph.bucket_color``."""


@dataclass(frozen=True)
class Store:
    """One shared store, declared as data; `build` and `key_statements` import their modules when called.

    :param name: the store's name, in messages and docs.
    :param title: how the data key's description and the docs name it.
    :param spec_key: its section under the spec's ``storage`` (None there: not configured).
    :param resources: what it adds to the storage stack, for the stack's description.
    :param uses_data_key: its resources are encrypted with the data key (named in the key's description).
    :param lifecycle_key: its key in HyperPod's lifecycle parameters (null while not mounted by the nodes).
    :param csi_addon: the EKS add-on that installs its CSI driver.
    :param settings: the model of its section (a `fmcluster.spec.storage.StoreSettings` in its folder's settings.py),
        which the composition root joins into the spec's ``storage`` under `spec_key`; None for a store without a
        section.
    :param summary: the section's description in the JSON Schema.
    :param always_described: the storage stack's description names it whether or not the spec configures it (the
        first store, named there since the first release; a description change is an update of every storage stack).
    :param rules: its Prometheus rule file (``rules.yaml`` in its folder): groups on what the nodes see of it, added
        to the cluster's AMP rule groups namespace where the spec configures it.
    :param dashboard: its Grafana panels (``dashboard.json`` in its folder), composed into the shipped storage and
        overview dashboards (`fmcluster.observability.dashboards`).
    :param short_title: how running text names it once introduced (`title` where empty).
    :param kept_bills: (resource type, what ``fmcluster synth``'s teardown line says of it) for each of its resources
        a stack delete keeps that bills until deleted by hand.
    """

    name: str
    title: str
    spec_key: str
    resources: str
    uses_data_key: bool = False
    lifecycle_key: Optional[str] = None
    csi_addon: Optional[CsiAddon] = None
    settings: Optional[Type[StoreSettings]] = None
    summary: str = ""
    always_described: bool = False
    rules: Optional[Path] = None
    dashboard: Optional[Path] = None
    short_title: str = ""
    kept_bills: Tuple[Tuple[str, str], ...] = ()

    def section(self, spec: ClusterSpec) -> Any:
        """Its section of the spec, or None where the spec does not configure it."""
        return getattr(spec.storage, self.spec_key, None)

    def key_statements(self, stack: Stack) -> List[iam.PolicyStatement]:
        """What the data key's policy grants the store's service, whether or not the spec configures it (the key is
        created first, and its policy must not change with the spec's storage)."""
        return []

    def build(self, scope: StorageScope) -> BuiltStore:
        """Build its resources in the storage stack (called only where `section` is not None)."""
        raise NotImplementedError(f"store {self.name} builds nothing")

    def changes(self) -> ChangeRules:
        """How ``fmcluster diff`` judges changes to its resources."""
        return ChangeRules()

    def status_describers(self) -> Mapping[str, Any]:
        """``fmcluster status``'s describers of its resources, by resource type (`fmcluster.aws.status.Describer`)."""
        return {}

    def preflight_checks(self, spec: ClusterSpec) -> List[Any]:
        """``fmcluster preflight``'s checks of its section (`fmcluster.aws.context.PreflightCheck`s; called only
        where the spec configures it)."""
        return []

    def s3_links(self, spec: ClusterSpec, created_bucket: str) -> List[S3Link]:
        """Its directories linked to S3, the data bucket fmcluster creates named `created_bucket` (called only where
        the spec configures it)."""
        return []

    def init_section(self) -> Optional[Dict[str, Any]]:
        """The section ``fmcluster init`` writes under ``storage.<spec_key>`` of a new spec unless told
        ``--no-<spec_key>`` (None: init offers none)."""
        return None

    def figures(self) -> StoreFigures:
        """What ``fmcluster plan`` and ``fmcluster diagram`` say of it (its folder's figures.py)."""
        return StoreFigures()


def installed_csi_addons(spec: ClusterSpec) -> List[CsiAddon]:
    """The CSI add-ons a Kubernetes cluster of `spec` installs for its stores, read off the spec's registered stores
    (`ClusterSpec.stores`): those installed on every cluster and those of the stores the spec configures, as
    `Mounts.csi_addons` decides at synth."""
    return [s.csi_addon for s in spec.stores if s.csi_addon is not None
            and (s.csi_addon.always or s.section(spec) is not None)]


@dataclass(frozen=True)
class Mounts:
    """What the cluster stack hands a kind: the spec's mounts in the registry's order, and the stores' declarations
    (what a kind installs or writes for every registered store, mounted or not)."""

    stores: Tuple[Store, ...] = ()
    mounts: Tuple[Mount, ...] = ()

    def __iter__(self) -> Iterator[Mount]:
        return iter(self.mounts)

    def __len__(self) -> int:
        return len(self.mounts)

    def served_by(self, service: str) -> List[Mount]:
        """The mounts `service` mounts itself (they have its form)."""
        return [m for m in self.mounts if service in m.services]

    def mounted_by_nodes(self, service: Optional[str] = None) -> List[Mount]:
        """The mounts the nodes mount themselves: all, or those `service` does not mount."""
        return [m for m in self.mounts if service is None or service not in m.services]

    def lifecycle_parameters(self, mounts: Sequence[Mount]) -> Dict[str, Any]:
        """HyperPod's lifecycle parameters for `mounts` (those the nodes mount): every registered store's key, its
        lifecycle entry or null. A mount without a lifecycle form has no key of its own: HyperPod's platform lists it
        by its boot form, or refuses it (platforms/hyperpod/mounts.py)."""
        found: Dict[str, Any] = {}
        for store in self.stores:
            if store.lifecycle_key is not None:
                entry = next((m.lifecycle for m in mounts if m.store == store.name and m.lifecycle is not None), None)
                found[store.lifecycle_key] = dict(entry) if entry is not None else None
        return found

    def csi_addons(self) -> List[Tuple[CsiAddon, Tuple[Permission, ...]]]:
        """The CSI add-ons a Kubernetes cluster installs, each with its driver's permissions: every store's that is
        always installed or serves a mount."""
        found = []
        for store in self.stores:
            addon = store.csi_addon
            if addon is None:
                continue
            volumes = [m.kubernetes for m in self.mounts if m.kubernetes is not None and m.kubernetes.addon == addon.name]
            if addon.always or volumes:
                found.append((addon, tuple(p for v in volumes for p in v.driver_permissions)))
        return found

    def volumes(self) -> List[Tuple[Mount, KubernetesVolume]]:
        """Every mount's Kubernetes volume. A mount without one is refused: pods could not reach it."""
        found = []
        for m in self.mounts:
            if m.kubernetes is None:
                raise ValueError(f"mounts: store {m.store} has no Kubernetes volume form")
            found.append((m, m.kubernetes))
        return found
