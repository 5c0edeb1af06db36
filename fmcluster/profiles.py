"""NodeProfile per node group, rendered at synth from the spec and shipped to the nodes."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.runtime.observability import DCGM_EXPORTER_PORT, NODE_EXPORTER_PORT
from fmcluster.runtime.profile import NodeProfile
from fmcluster.spec import ClusterSpec, NodeGroup


def exporters(spec: ClusterSpec, group: NodeGroup) -> List[Dict[str, Any]]:
    """Exporters the observability bootstrap starts; warn-only, since the DCGM exporter's
    image can still be pulling when the boot validation runs."""
    if not spec.observability.enabled:
        return []
    found: List[Dict[str, Any]] = [
        {"name": "node_exporter", "url": f"http://127.0.0.1:{NODE_EXPORTER_PORT}/metrics",
         "expect": "node_textfile_scrape_error", "required": False},
    ]
    if group.instance.is_gpu:
        found.append({"name": "dcgm-exporter", "url": f"http://127.0.0.1:{DCGM_EXPORTER_PORT}/metrics",
                      "expect": "DCGM_FI_DEV_GPU_TEMP", "required": False})
    return found


def mounts(spec: ClusterSpec, group: NodeGroup) -> List[Dict[str, Any]]:
    """What each store section of the spec expects every node to have mounted (`StoreSettings.node_mounts`)."""
    found: List[Dict[str, Any]] = []
    for _, section in spec.storage.store_sections():
        found += section.node_mounts(group)
    return found


def node_profile(spec: ClusterSpec, group: NodeGroup) -> NodeProfile:
    return NodeProfile.from_catalog(
        group.instance_type,
        exporters=exporters(spec, group),
        mounts=mounts(spec, group),
        group=group.name,
        disabled_checks=list(spec.validation.skip_checks),
        min_versions=dict(spec.validation.min_versions),
        pinned_versions=dict(spec.validation.pinned_versions),
        orchestrator=spec.orchestrator_kind.nodes.agent,
        policy=spec.validation_policy,
        level=spec.validation.level,
        instance_store=NVME.path if NVME.size(group.instance) is not None else None,
    )


def node_profile_json(spec: ClusterSpec, group: NodeGroup) -> str:
    return node_profile(spec, group).to_json(indent=None)
