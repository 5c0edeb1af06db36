"""Kueue, rendered from a Kubernetes kind's settings (any with the fields of `KueueCluster`; the eks kind's today): the
controller's configuration (all-or-nothing admission with waitForPodsReady),
and the queue objects (a Topology per network-topology depth, a ResourceFlavor per node group, one ClusterQueue with
GPU/EFA/CPU/memory quotas from the node counts, a LocalQueue in the training namespace). API kueue.x-k8s.io/v1beta2
(Kueue >= 0.16). https://kueue.sigs.k8s.io/docs/concepts/ ; .../topology_aware_scheduling/ ; .../tasks/manage/
setup_wait_for_pods_ready/"""

from __future__ import annotations

from typing import Any, Dict, List, Protocol

import yaml

from fmcluster import catalog
from fmcluster.platforms.kubernetes import devices, labels
from fmcluster.platforms.kubernetes.settings import SYSTEM_GROUP, KueueSettings
from fmcluster.spec import NodeGroup


class SystemNodes(Protocol):
    @property
    def instance_type(self) -> str: ...

    @property
    def count(self) -> int: ...


class KueueCluster(Protocol):
    """What Kueue is rendered from: a kind's settings with its Kueue section, EFA device mode, system nodes and the
    training namespace (the eks kind's `EksSettings`)."""

    @property
    def kueue(self) -> KueueSettings: ...

    @property
    def efa_device(self) -> str: ...

    @property
    def system_nodes(self) -> SystemNodes: ...

    @property
    def training_namespace(self) -> str: ...


API = "kueue.x-k8s.io/v1beta2"
QUEUE = "training"  # the ClusterQueue's and the LocalQueue's name
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
NAMESPACE = "kueue-system"
# Jobs fmcluster's examples use (batch/v1 Job) and what common training stacks submit; pods and deployments are left
# out so that nothing outside a queue is gated by Kueue.
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob",
              "trainer.kubeflow.org/trainjob", "ray.io/rayjob", "ray.io/raycluster")
# EFA's hugepages (the EFA sample jobs request hugepages-2Mi) are not quota: Kueue would refuse a workload asking for
# a resource its ClusterQueue does not cover.
EXCLUDED_RESOURCE_PREFIXES = ("hugepages-",)
# The system nodes' flavor, for the small pods a job runs beside its GPU pods (an MPIJob's launcher): without it Kueue
# charges them to a GPU group's flavor and they take the CPU a whole-node worker leaves the node's DaemonSets. Kueue
# admits a pod set to a flavor with nodeTaints only when its pods tolerate them (ResourceFlavor docs, "taints for
# user-selective scheduling"), so nothing lands on the system nodes' quota unless it asks to; the nodes carry no taint.
SYSTEM_FLAVOR = SYSTEM_GROUP
SYSTEM_FLAVOR_TAINT: Dict[str, str] = {"key": "fmcluster.io/system-nodes", "value": "true", "effect": "NoSchedule"}
# In a ClusterQueue whose flavors all name a Topology, a pod set without a topology annotation is placed by
# topology-aware scheduling too; in a mixed one such a pod set may use no TAS flavor at all (kueue v0.19.2
# pkg/scheduler/flavorassigner, isTASImplied and checkPodSetAndFlavorMatchForTAS). The system flavor names a
# host-level Topology exactly when the GPU flavors all do, so adding it never changes which flavors other jobs can use.
HOST_TOPOLOGY = "hosts"


def topology_name(instance_type: str) -> str:
    """One Topology per depth of EC2's network topology: aws-3-layers, aws-4-layers."""
    return f"aws-{len(labels.topology_levels(instance_type)) - 1}-layers"


def device_class_mappings(efa_device: str) -> List[Dict[str, Any]]:
    """With the EFA DRA driver: its DeviceClass mapped to the quota resource vpc.amazonaws.com/efa (the one the device
    plugin's extended resource is charged to), so a claim's ExactCount ``count`` is charged like the plugin's request.
    Without a mapping Kueue marks every workload claiming the class inadmissible ("DeviceClass ... is not mapped in
    DRA configuration", kueue v0.19.2 pkg/dra/claims.go; Configuration resources.deviceClassMappings,
    apis/config/v1beta2; site docs tasks/manage/setup_dra.md)."""
    if efa_device != "dra":
        return []
    return [{"name": labels.EFA_RESOURCE, "deviceClassNames": [devices.EFA_DEVICE_CLASS]}]


def configuration(settings: KueueCluster) -> Dict[str, Any]:
    """The controller manager's Configuration (config.kueue.x-k8s.io/v1beta2): the chart's defaults plus
    waitForPodsReady. blockAdmission admits one workload at a time until its pods are ready, so two gangs never hold
    half the cluster each; a workload not ready in time is evicted and requeued with backoff. With the EFA DRA
    driver, the DeviceClass's mapping to the EFA quota resource."""
    resources: Dict[str, Any] = {"excludeResourcePrefixes": list(EXCLUDED_RESOURCE_PREFIXES)}
    mappings = device_class_mappings(settings.efa_device)
    if mappings:
        resources["deviceClassMappings"] = mappings
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": f"{settings.kueue.wait_for_pods_ready_seconds}s",
            "blockAdmission": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "resources": resources,
    }


def chart_values(settings: KueueCluster, *, system_selector: Dict[str, str]) -> Dict[str, Any]:
    """Helm values of the kueue chart: our Configuration, the controller on the system nodes."""
    return {
        "controllerManager": {"nodeSelector": dict(system_selector)},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration(settings), sort_keys=False)},
    }


def tas_only(groups: List[NodeGroup], settings: KueueCluster) -> bool:
    """Every node group's flavor names a Topology (Kueue then places every pod set by topology)."""
    return settings.kueue.topology_aware and all(labels.topology_levels(g.instance_type) for g in groups)


def _topologies(groups: List[NodeGroup], settings: KueueCluster) -> List[Dict[str, Any]]:
    found: Dict[str, List[str]] = {}
    for g in groups:
        levels = labels.topology_levels(g.instance_type)
        if levels:
            found[topology_name(g.instance_type)] = levels
    if tas_only(groups, settings):
        found[HOST_TOPOLOGY] = [labels.HOSTNAME]
    return [{"apiVersion": API, "kind": "Topology", "metadata": {"name": name},
             "spec": {"levels": [{"nodeLabel": level} for level in levels]}} for name, levels in sorted(found.items())]


def flavor(group: NodeGroup, *, topology_aware: bool) -> Dict[str, Any]:
    """A ResourceFlavor per node group: its nodes by label; Kueue adds the GPU toleration to admitted pods (never the
    validation gate's)."""
    spec: Dict[str, Any] = {"nodeLabels": {labels.GROUP: group.name}}
    if group.instance.is_gpu:
        spec["tolerations"] = labels.tolerate(labels.GPU_TAINT)
    if topology_aware and labels.topology_levels(group.instance_type):
        spec["topologyName"] = topology_name(group.instance_type)
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": group.name}, "spec": spec}


def system_flavor(groups: List[NodeGroup], settings: KueueCluster) -> Dict[str, Any]:
    """The system nodes' flavor: only pod sets that tolerate its taint are admitted to it."""
    spec: Dict[str, Any] = {"nodeLabels": {labels.GROUP: SYSTEM_FLAVOR}, "nodeTaints": [dict(SYSTEM_FLAVOR_TAINT)]}
    if tas_only(groups, settings):
        spec["topologyName"] = HOST_TOPOLOGY
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": SYSTEM_FLAVOR}, "spec": spec}


def system_quotas(settings: KueueCluster) -> List[Dict[str, Any]]:
    """The system nodes' CPU and memory; no GPU or EFA (every flavor names every covered resource)."""
    t = catalog.get(settings.system_nodes.instance_type)
    nodes = settings.system_nodes.count
    amounts = {"cpu": t.vcpus * nodes, "memory": f"{t.memory_mib * nodes}Mi", labels.GPU_RESOURCE: 0,
               labels.EFA_RESOURCE: 0}
    return [{"name": r, "nominalQuota": amounts[r]} for r in covered_resources(settings.efa_device)]


def covered_resources(efa_device: str) -> List[str]:
    """What the ClusterQueue's quotas cover. EFA with either driver: the device plugin's extended resource, or the
    DRA driver's DeviceClass mapped to the same name (device_class_mappings); Kueue refuses a workload asking for a
    resource its ClusterQueue does not cover."""
    if efa_device not in ("plugin", "dra"):
        raise ValueError(f"efa_device: {efa_device!r} is not plugin or dra")
    return ["cpu", "memory", labels.GPU_RESOURCE, labels.EFA_RESOURCE]


def quotas(group: NodeGroup, efa_device: str) -> List[Dict[str, Any]]:
    """Nominal quota of a flavor: the group's whole capacity at its ceiling (the scheduler still places against
    allocatable). An elastic group's quota is max_count nodes: a job Kueue does not admit creates no pods, and Cluster
    Autoscaler scales up only for pending pods. EFA: the group's EFA interfaces, its EFA devices under either driver."""
    t = group.instance
    nodes = group.max_size
    amounts = {
        "cpu": t.vcpus * nodes,
        "memory": f"{t.memory_mib * nodes}Mi",
        labels.GPU_RESOURCE: (t.gpus or 0) * nodes,
        labels.EFA_RESOURCE: (t.efa_interfaces if group.efa_enabled else 0) * nodes,
    }
    return [{"name": r, "nominalQuota": amounts[r]} for r in covered_resources(efa_device)]


def queue_objects(groups: List[NodeGroup], settings: KueueCluster) -> List[Dict[str, Any]]:
    """Topologies, flavors (the node groups', then the system nodes', tried in that order), the ClusterQueue and the
    LocalQueue, in the order they must be applied."""
    topology_aware = settings.kueue.topology_aware
    objects = _topologies(groups, settings) if topology_aware else []
    objects += [flavor(g, topology_aware=topology_aware) for g in groups]
    objects.append(system_flavor(groups, settings))
    objects.append({
        "apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": covered_resources(settings.efa_device),
                "flavors": [{"name": g.name, "resources": quotas(g, settings.efa_device)} for g in groups]
                + [{"name": SYSTEM_FLAVOR, "resources": system_quotas(settings)}],
            }],
        },
    })
    objects.append({"apiVersion": API, "kind": "LocalQueue",
                    "metadata": {"name": QUEUE, "namespace": settings.training_namespace},
                    "spec": {"clusterQueue": QUEUE}})
    return objects
