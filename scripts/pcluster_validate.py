#!/usr/bin/env python3
"""Validate an AWS ParallelCluster 3 cluster configuration offline, with ParallelCluster's own code.

    .venv-pcluster/bin/python scripts/pcluster_validate.py CONFIG.{json,yaml} [--cluster-name NAME] [--schema-only]

Runs in the virtualenv `make setup` creates from requirements-pcluster.lock (aws-parallelcluster installed
without its CDK v1 dependencies, which the schema never imports). Two steps:

1. ``ClusterSchema(cluster_name=NAME).load(config)``: the schema step ParallelCluster runs first on every create
   and update (its ConfigSchemaValidator): types, enums, id patterns, required and unknown keys.
2. Unless --schema-only: ParallelCluster's validators whose logic needs no AWS call, called with the arguments
   ParallelCluster registers them with (cluster and queue names, Capacity Block sizes, EFA placement groups,
   placement group with Capacity Blocks, root volume encryption, mixed security groups, Slurm settings deny
   lists, shared storage names and mount directories against each other and against the nodes' ephemeral-volume
   mount directories, instance type vs OS), plus rules of AWS-bound validators re-stated here and marked
   "(re-stated)": placement group naming, Capacity Block reservations, EFA GDR, and the custom actions' script URLs
   (UrlValidator: s3:// or https:// only; it then reads the object, which offline it cannot). ParallelCluster
   counts a node's ephemeral mount directory only where its instance type has instance storage (it asks EC2);
   offline every node counts, so the gate refuses at least what ParallelCluster refuses. ``config.validate()``
   itself cannot run offline: merely registering its validators resolves subnets, AMIs and instance types through
   EC2.

Offline: every botocore API call fails with a BotoCoreError before credentials or a socket are touched;
ParallelCluster turns that into the AWSClientError it already tolerates (the only call the schema makes warms a
capacity reservation cache). Blocked calls are listed. Only ERROR findings make a configuration invalid
(ParallelCluster's default ValidationFailureLevel).

Output (stdout): JSON {"valid", "errors", "findings": [{"level", "validator", "message"}], "blocked_aws_calls"}.
Exit: 0 valid, 1 invalid, 2 usage or unreadable configuration.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from typing import Any, Dict, List
from urllib.parse import urlparse

import yaml
from marshmallow import ValidationError
from offline_aws import BLOCKED  # before ParallelCluster is imported: it blocks every AWS call


def offline_findings(cluster: Any) -> List[Dict[str, str]]:
    """ParallelCluster's AWS-free validators over a loaded configuration (see the module docstring)."""
    from pcluster.config.common import CapacityType
    from pcluster.constants import (
        DEFAULT_EPHEMERAL_DIR,
        MAX_COMPUTE_RESOURCES_PER_QUEUE,
        MAX_NUMBER_OF_COMPUTE_RESOURCES_PER_CLUSTER,
        MAX_NUMBER_OF_QUEUES,
    )
    from pcluster.validators import cluster_validators as cv
    from pcluster.validators import ec2_validators as ev
    from pcluster.validators import slurm_settings_validator as sv

    found: List[Dict[str, str]] = []

    def run(validator: Any, **kwargs: Any) -> None:
        for r in validator().execute(**kwargs):
            found.append({"level": r.level.name, "validator": r.validator_type, "message": r.message})

    def restated(validator: str, message: str) -> None:
        found.append({"level": "ERROR", "validator": f"{validator} (re-stated)", "message": message})

    queues = cluster.scheduling.queues
    run(cv.ClusterNameValidator, name=cluster.cluster_name, scheduling=cluster.scheduling)
    run(cv.DuplicateNameValidator, name_list=[q.name for q in queues], resource_name="Queue")
    run(cv.MaxCountValidator, resources_length=len(queues), max_length=MAX_NUMBER_OF_QUEUES,
        resource_name="SlurmQueues")
    run(cv.MaxCountValidator, resources_length=sum(len(q.compute_resources) for q in queues),
        max_length=MAX_NUMBER_OF_COMPUTE_RESOURCES_PER_CLUSTER, resource_name="ComputeResources per Cluster")
    run(cv.RootVolumeEncryptionConsistencyValidator,
        encryption_settings=[(q.name, q.compute_settings.local_storage.root_volume.encrypted) for q in queues])
    run(cv.MixedSecurityGroupOverwriteValidator, head_node_security_groups=cluster.head_node.networking.security_groups,
        queues=queues)
    settings = cluster.scheduling.settings
    if settings.custom_slurm_settings:
        run(sv.CustomSlurmSettingsValidator, custom_settings=settings.custom_slurm_settings,
            deny_list=sv.SLURM_SETTINGS_DENY_LIST["SlurmConf"]["Global"],
            settings_level=sv.CustomSlurmSettingLevel.SLURM_CONF)
        run(sv.CustomSlurmNodeNamesValidator, custom_settings=settings.custom_slurm_settings)
    for q in queues:
        multi_az = len(set(q.networking.subnet_ids)) > 1  # ParallelCluster resolves AZs through EC2
        run(cv.NameValidator, name=q.name)
        run(cv.DuplicateNameValidator, name_list=[c.name for c in q.compute_resources], resource_name="Compute resource")
        run(cv.MaxCountValidator, resources_length=len(q.compute_resources), max_length=MAX_COMPUTE_RESOURCES_PER_QUEUE,
            resource_name="ComputeResources per Queue")
        for c in q.compute_resources:
            run(cv.NameValidator, name=c.name)
            pg = q.get_chosen_placement_group_setting_for_compute_resource(c)
            run(cv.EfaPlacementGroupValidator, efa_enabled=c.efa.enabled,
                placement_group_key=q.get_placement_group_settings_for_compute_resource(c).get("key"),
                placement_group_disabled=pg.enabled is False, multi_az_enabled=multi_az,
                capacity_type=q.capacity_type, queue_name=q.name)
            run(cv.ComputeResourceSizeValidator, min_count=c.min_count, max_count=c.max_count,
                capacity_type=q.capacity_type)
            run(ev.PlacementGroupCapacityTypeValidator, capacity_type=q.capacity_type,
                placement_group_enabled=q.is_placement_group_enabled_for_compute_resource(c))
            for group in (q.networking.placement_group, c.networking.placement_group):
                if group.id and group.name:
                    restated("PlacementGroupNamingValidator",
                             "PlacementGroup Id cannot be set when setting PlacementGroup Name.")
                if (group.name or group.id) and group.enabled is False:
                    restated("PlacementGroupNamingValidator",
                             "The PlacementGroup feature must be enabled to assign a Name or Id.")
            if getattr(c, "_instance_type", None) is not None or c.is_flexible():
                # an instance type that comes from a capacity reservation would need EC2
                for instance_type in c.instance_types:
                    run(ev.InstanceTypeOSCompatibleValidator, instance_type=instance_type, os=cluster.image.os)
            target = c.capacity_reservation_target or q.capacity_reservation_target
            if q.capacity_type == CapacityType.CAPACITY_BLOCK and not (target and target.capacity_reservation_id):
                restated("CapacityTypeValidator",
                         "Capacity Reservation id is required when using CAPACITY_BLOCK as capacity type.")
            if c.efa.gdr_support and not c.efa.enabled:
                restated("EfaValidator", "The EFA GDR Support can be used only if EFA is enabled.")
    storages = cluster.shared_storage or []
    for s in storages:
        run(cv.SharedStorageNameValidator, name=s.name)
        run(cv.SharedStorageMountDirValidator, mount_dir=s.mount_dir)
    local: Dict[str, set] = {}  # ephemeral mount dir -> instance types (every node counts offline)

    def ephemeral_dir(settings: Any) -> str:
        volume = settings.local_storage.ephemeral_volume if settings.local_storage else None
        return volume.mount_dir if volume and volume.mount_dir else DEFAULT_EPHEMERAL_DIR

    local.setdefault(ephemeral_dir(cluster.head_node), set()).add(cluster.head_node.instance_type)
    for q in queues:
        local.setdefault(ephemeral_dir(q.compute_settings), set()).update(
            t for c in q.compute_resources for t in c.instance_types)
    if storages:
        run(cv.DuplicateNameValidator, name_list=[s.name for s in storages], resource_name="Shared Storage")
        run(cv.DuplicateMountDirValidator, shared_storage_name_mount_dir_tuple_list=[(s.name, s.mount_dir) for s in storages],
            local_mount_dir_instance_types_dict=local)
        run(cv.OverlappingMountDirValidator, shared_mount_dir_list=[s.mount_dir for s in storages],
            local_mount_dir_list=list(local))
    for where, actions in [("HeadNode", cluster.head_node.custom_actions),
                           *((f"SlurmQueues/{q.name}", q.custom_actions) for q in queues)]:
        for url in custom_action_scripts(actions):
            scheme = urlparse(url).scheme
            if scheme not in ("s3", "https"):
                restated("UrlValidator", f"{where}: The value '{url}' is not a valid URL, choose URL with 'https' or "
                         "'s3' prefix.")
            elif scheme == "s3" and not re.match(r"s3://(.*?)/(.*)", url):
                restated("UrlValidator", f"{where}: s3 url '{url}' is invalid.")
    return found


def custom_action_scripts(actions: Any) -> List[str]:
    """The script URLs of a CustomActions section: each event's action, or the actions of its sequence."""
    urls: List[str] = []
    for event in ("on_node_start", "on_node_configured", "on_node_updated"):
        action = getattr(actions, event, None) if actions is not None else None
        for one in (action if isinstance(action, list) else getattr(action, "sequence", None) or [action]):
            script = getattr(one, "script", None)
            if script:
                urls.append(script)
    return urls


def validate(config: Dict[str, Any], cluster_name: str, schema_only: bool) -> Dict[str, Any]:
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("pcluster").setLevel(logging.CRITICAL)  # it logs the blocked cache warm-up call
    from pcluster.schemas.cluster_schema import ClusterSchema

    errors: Dict[str, Any] = {}
    cluster = None
    try:
        cluster = ClusterSchema(cluster_name=cluster_name).load(config)
    except ValidationError as e:
        errors.update(e.messages if isinstance(e.messages, dict) else {"_schema": e.messages})
    except Exception as e:  # noqa: BLE001 - an AWS call outside the tolerated paths, or a bug: report it
        errors["_exception"] = [f"{type(e).__name__}: {e}"]
    findings: List[Dict[str, str]] = []
    if cluster is not None and not schema_only:
        findings = offline_findings(cluster)
        bad = [f"{f['validator']}: {f['message']}" for f in findings if f["level"] == "ERROR"]
        if bad:
            errors["_validators"] = bad
    return {"valid": not errors, "errors": errors, "findings": findings, "blocked_aws_calls": BLOCKED}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="pcluster_validate.py", description=__doc__.splitlines()[0])
    ap.add_argument("config", help="cluster configuration, JSON or YAML")
    ap.add_argument("--cluster-name", default="fmcluster-offline")
    ap.add_argument("--schema-only", action="store_true", help="only ClusterSchema.load")
    args = ap.parse_args(argv)
    try:
        with open(args.config, encoding="utf-8") as fh:
            text = fh.read()
        config = json.loads(text) if args.config.endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as e:
        print(json.dumps({"valid": False, "errors": {"_read": [str(e)]}}))
        return 2
    result = validate(config, args.cluster_name, args.schema_only)
    print(json.dumps(result, indent=2, default=str))
    return 0 if result["valid"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
