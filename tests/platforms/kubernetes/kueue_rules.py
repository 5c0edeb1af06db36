"""Kueue v0.19.2's admission rules that no CRD or OpenAPI schema checks, transcribed from its source so the tests
can put a workload through them offline. Each function names the code it follows (github.com/kubernetes-sigs/kueue
at tag v0.19.2):

- `validate_device_class_mappings`: the Configuration's resources.deviceClassMappings, as the controller validates
  it at start (pkg/config/validation.go, validateDeviceClassMappings);
- `claim_requests`: what a ResourceClaimTemplate charges to quota, or why the workload is inadmissible
  (pkg/dra/claims.go, countDevicesPerClass and GetResourceRequestsForResourceClaimTemplates);
- `podset_requests`: a pod set's quota requests: the pod's requests less the excluded prefixes, plus the DRA
  logical resources, times the pod count (pkg/workload/workload.go, totalRequestsFromPodSets);
- `admission_problems`: a ClusterQueue must cover every requested resource ("resource %s unavailable in
  ClusterQueue", pkg/scheduler/flavorassigner/flavorassigner.go findFlavorForPodSets), and one flavor of the
  resource group must hold all of them within its nominal quota (borrowing and preemption left out);
- `flavor_for`: which flavor a pod set gets: the resource group's flavors in order, skipping one whose nodeLabels
  the pod's nodeSelector contradicts, one with a nodeTaint the pod does not tolerate (flavorassigner.go
  checkFlavorForPodSets) and, by topology-aware scheduling, a TAS flavor for a pod set without a topology request in
  a ClusterQueue that is not TAS-only or a non-TAS flavor for a pod set with one (checkPodSetAndFlavorMatchForTAS,
  isTASImplied), then the first whose quota holds the requests.

Simplifications, all on the strict side: one resource group, no cohort, no TAS (TAS places by the pod spec's own
requests, tas_flavorassigner.go podSetTopologyRequest, so DRA logical resources never meet node capacity), no
feature-gated DRA paths (counters, capacity, extended resources backed by DRA: fmcluster uses none).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Sequence

# k8s.io/apimachinery validation.IsQualifiedName (content.IsLabelKey): optional DNS-subdomain prefix, then a name
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "k": 10**3, "M": 10**6, "G": 10**9,
             "T": 10**12}


class Inadmissible(Exception):
    """Kueue would set QuotaReserved=False / Inadmissible on the workload, with this message."""


def _label_key(value: str) -> bool:
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a number (cpu in cores, memory in bytes)."""
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value)
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def validate_device_class_mappings(configuration: Mapping[str, Any]) -> List[str]:
    """validateDeviceClassMappings: at most 16 mappings; each name a qualified name, unique; 1-8 device class names,
    each a qualified name, unique within the mapping, and mapped to one resource only (counter sources aside)."""
    mappings = (configuration.get("resources") or {}).get("deviceClassMappings") or []
    errors: List[str] = []
    if len(mappings) > 16:
        errors.append("resources.deviceClassMappings: too many (max 16)")
    names: set = set()
    class_to_resource: Dict[str, str] = {}
    for i, mapping in enumerate(mappings):
        at = f"resources.deviceClassMappings[{i}]"
        if set(mapping) - {"name", "deviceClassNames", "sources"}:
            errors.append(f"{at}: unknown fields {sorted(set(mapping) - {'name', 'deviceClassNames', 'sources'})}")
        name = mapping.get("name", "")
        if not _label_key(name):
            errors.append(f"{at}.name: {name!r} is not a qualified name")
        if name in names:
            errors.append(f"{at}.name: duplicate {name!r}")
        names.add(name)
        classes = mapping.get("deviceClassNames") or []
        if not classes:
            errors.append(f"{at}.deviceClassNames: at least one device class name is required")
        if len(classes) > 8:
            errors.append(f"{at}.deviceClassNames: too many (max 8)")
        if len(set(classes)) != len(classes):
            errors.append(f"{at}.deviceClassNames: duplicate")
        for cls in classes:
            if not _label_key(cls):
                errors.append(f"{at}.deviceClassNames: {cls!r} is not a qualified name")
            if class_to_resource.get(cls, name) != name:
                errors.append(f"{at}.deviceClassNames: {cls} already mapped to resource {class_to_resource[cls]}")
            class_to_resource.setdefault(cls, name)
    return errors


def claim_requests(claim_template: Mapping[str, Any], configuration: Mapping[str, Any]) -> Dict[str, int]:
    """countDevicesPerClass, then the mapper's Lookup: {logical resource: devices} for one pod, or Inadmissible."""
    mapping = {cls: m["name"] for m in (configuration.get("resources") or {}).get("deviceClassMappings") or []
               for cls in m["deviceClassNames"]}
    per_class: Dict[str, int] = {}
    name = claim_template["metadata"]["name"]
    for i, request in enumerate(claim_template["spec"]["spec"]["devices"]["requests"]):
        at = f"ResourceClaimTemplate {name}: devices.requests[{i}]"
        if "firstAvailable" in request:
            raise Inadmissible(f"{at}: FirstAvailable device selection is not supported")
        exactly = request.get("exactly")
        if exactly is None:
            raise Inadmissible(f"{at}: Exactly must be set if FirstAvailable is nil")
        if exactly.get("adminAccess"):
            raise Inadmissible(f"{at}.exactly.adminAccess: AdminAccess is not supported")
        mode = exactly.get("allocationMode", "ExactCount")  # the API server's default
        if mode == "All":
            raise Inadmissible(f"{at}.exactly.allocationMode: AllocationMode 'All' is not supported")
        if mode != "ExactCount":
            raise Inadmissible(f"{at}.exactly.allocationMode: unsupported allocation mode: {mode}")
        cls = exactly.get("deviceClassName", "")
        if cls:
            per_class[cls] = per_class.get(cls, 0) + int(exactly.get("count", 1))  # count defaults to 1
    out: Dict[str, int] = {}
    for cls, count in per_class.items():
        if cls not in mapping:
            raise Inadmissible(f"DeviceClass {cls} is not mapped in DRA configuration")
        out[mapping[cls]] = out.get(mapping[cls], 0) + count
    return out


def podset_requests(pod_spec: Mapping[str, Any], count: int, claim_templates: Mapping[str, Mapping[str, Any]],
                    configuration: Mapping[str, Any]) -> Dict[str, float]:
    """totalRequestsFromPodSets: the containers' requests (limits where a request is missing, as the API server
    defaults them), less resources.excludeResourcePrefixes, plus each referenced claim template's DRA resources,
    times `count`. A pod-level ResourceClaim (not a template) is inadmissible."""
    excluded = (configuration.get("resources") or {}).get("excludeResourcePrefixes") or []
    per_pod: Dict[str, float] = {}
    for container in pod_spec.get("containers", []):
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in merged.items():
            if any(name.startswith(p) for p in excluded):
                continue
            per_pod[name] = per_pod.get(name, 0.0) + quantity(value)
    for claim in pod_spec.get("resourceClaims", []):
        if "resourceClaimName" in claim:
            raise Inadmissible("KueueDRAIntegration feature does not support use of resource claims")
        template = claim_templates.get(claim.get("resourceClaimTemplateName", ""))
        if template is None:
            raise Inadmissible(f"failed to get claim spec for ResourceClaimTemplate {claim.get('resourceClaimTemplateName')}")
        for name, devices in claim_requests(template, configuration).items():
            per_pod[name] = per_pod.get(name, 0.0) + devices
    return {name: value * count for name, value in per_pod.items()}


def admission_problems(requests: Mapping[str, float], cluster_queue: Mapping[str, Any]) -> List[str]:
    """Why the ClusterQueue cannot admit `requests` (empty: it can, on an empty cluster)."""
    (group,) = cluster_queue["spec"]["resourceGroups"]
    covered = set(group["coveredResources"])
    problems = [f"resource {name} unavailable in ClusterQueue" for name in sorted(requests) if name not in covered]
    if problems:
        return problems
    fits: List[str] = []
    for flavor in group["flavors"]:
        quota = {r["name"]: quantity(r["nominalQuota"]) for r in flavor["resources"]}
        short = [f"{name}: {requests[name]:g} > {quota.get(name, 0):g}" for name in sorted(requests)
                 if requests[name] > quota.get(name, 0)]
        if not short:
            return []
        fits.append(f"flavor {flavor['name']}: insufficient quota ({'; '.join(short)})")
    return fits


def admit(pod_spec: Mapping[str, Any], count: int, claim_templates: Sequence[Mapping[str, Any]],
          configuration: Mapping[str, Any], cluster_queue: Mapping[str, Any]) -> Dict[str, float]:
    """The pod set's quota requests if the ClusterQueue admits it, else Inadmissible with Kueue's reasons."""
    errors = validate_device_class_mappings(configuration)
    if errors:
        raise Inadmissible("the Kueue controller refuses its Configuration: " + "; ".join(errors))
    requests = podset_requests(pod_spec, count, {t["metadata"]["name"]: t for t in claim_templates}, configuration)
    problems = admission_problems(requests, cluster_queue)
    if problems:
        raise Inadmissible("; ".join(problems))
    return requests


def node_fit_problems(pod_spec: Mapping[str, Any], allocatable: Mapping[str, float]) -> List[str]:
    """Topology-aware scheduling places a pod set by the pod's own full requests (no excluded prefixes) against what
    each node can hold (tas_flavorassigner.go podSetTopologyRequest, then the per-domain capacity): the requests of a
    pod that one node of `allocatable` cannot hold, for the resources that allocatable names."""
    per_pod: Dict[str, float] = {}
    for container in pod_spec.get("containers", []):
        resources = container.get("resources") or {}
        for name, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
            per_pod[name] = per_pod.get(name, 0.0) + quantity(value)
    return [f"{name}: {per_pod[name]:g} > node allocatable {allocatable[name]:g}" for name in sorted(per_pod)
            if name in allocatable and per_pod[name] > allocatable[name]]


TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
                        "kueue.x-k8s.io/podset-unconstrained-topology")


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]) or t.get("key") not in (None, "", taint["key"]):
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.get("value"):
            return True
    return False


def flavor_for(template: Mapping[str, Any], requests: Mapping[str, float], cluster_queue: Mapping[str, Any],
               flavors: Mapping[str, Mapping[str, Any]]) -> str:
    """The flavor Kueue assigns the pod set of pod `template` (metadata and spec) with quota `requests`, or
    Inadmissible with each flavor's reason."""
    (group,) = cluster_queue["spec"]["resourceGroups"]
    pod = template["spec"]
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    explicit_tas = any(a in annotations for a in TOPOLOGY_ANNOTATIONS)
    tas_only = all("topologyName" in flavors[f["name"]]["spec"] for f in group["flavors"])
    selector = pod.get("nodeSelector") or {}
    reasons: List[str] = []
    for entry in group["flavors"]:
        name, spec = entry["name"], flavors[entry["name"]]["spec"]
        if any(k in selector and selector[k] != v for k, v in (spec.get("nodeLabels") or {}).items()):
            reasons.append(f"flavor {name} doesn't match node affinity")
            continue
        untolerated = [t for t in spec.get("nodeTaints") or [] if not _tolerates(pod.get("tolerations") or [], t)]
        if untolerated:
            reasons.append(f"untolerated taint {untolerated[0]} in flavor {name}")
            continue
        if explicit_tas and "topologyName" not in spec:
            reasons.append(f"Flavor {name!r} does not support TopologyAwareScheduling")
            continue
        if not explicit_tas and not tas_only and "topologyName" in spec:
            reasons.append(f"Flavor {name!r} supports only TopologyAwareScheduling")
            continue
        quota = {r["name"]: quantity(r["nominalQuota"]) for r in entry["resources"]}
        short = [f"{r}: {requests[r]:g} > {quota.get(r, 0):g}" for r in sorted(requests) if requests[r] > quota.get(r, 0)]
        if not short:
            return str(name)
        reasons.append(f"flavor {name}: insufficient quota ({'; '.join(short)})")
    raise Inadmissible("; ".join(reasons))
