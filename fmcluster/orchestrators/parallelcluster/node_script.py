"""The custom actions every ParallelCluster node runs: node/on_node_configured.sh (beside this module),
published under a stable key by `NodeAssets`, and arguments that never change with fmcluster's runtime or the
collectors' settings or the spec's validation settings: the node's role and group and where its assets are. The
validation level and policy travel in the group's published profile, so changing them replaces no compute node.

ParallelCluster refuses updates of the head node's OnNodeConfigured Script and Args (UNSUPPORTED) and replaces a
queue's compute nodes when its custom actions change (QUEUE_UPDATE_STRATEGY); the head node's OnNodeUpdated is
SUPPORTED, and its ``--revision`` argument (a digest of what the head node reads) makes an update run it after a
new runtime or settings were published (pcluster/schemas/cluster_schema.py, HeadNodeCustomActionsSchema).

Where the spec has a store ParallelCluster does not mount itself (no SharedStorage form: Mountpoint for Amazon S3),
each action is a ``Sequence`` (added in ParallelCluster 3.6.0, its scripts run in the order listed:
https://docs.aws.amazon.com/parallelcluster/latest/ug/custom-bootstrap-actions-config-v3.html; the same schema's
OneOrManyCustomActionField): the published ``mounts.sh`` first, which runs the stores' boot lines, then fmcluster's
script, whose validator then finds the mounts. Without such a store the actions stay a single ``Script``, as before."""

from __future__ import annotations

import re
from typing import Any, Dict, List

from aws_cdk import Token
from constructs import Construct

from fmcluster.orchestrators.parallelcluster.assets import SCRIPT_PATH, NodeAssets

SCRIPT = SCRIPT_PATH

ROLES = ("head", "compute")
# ParallelCluster passes Args to the script as words: every literal value must be one word.
WORD = re.compile(r"^\S+$")


class OnNodeConfiguredScript(Construct):
    """The ``CustomActions`` sections that run the published script.

    :param assets: the node assets (script, runtime, settings, profiles) under their stable keys.
    :param region: the region the nodes fetch from.
    """

    def __init__(self, scope: Construct, id: str, *, assets: NodeAssets, region: str) -> None:
        super().__init__(scope, id)
        if region and not Token.is_unresolved(region) and not WORD.match(region):
            raise ValueError(f"region: {region!r} must be one word (ParallelCluster splits Args on spaces)")
        self.assets = assets
        self.region = region

    @property
    def s3_url(self) -> str:
        return self.assets.script_url

    def _args(self, role: str, node_group: str) -> List[str]:
        if role not in ROLES:
            raise ValueError(f"role: {role!r} is not one of {', '.join(ROLES)}")
        if not WORD.match(node_group):
            raise ValueError(f"node_group: {node_group!r} must be one word")
        return ["--role", role, "--source", self.assets.source_url, "--region", self.region, "--node-group", node_group]

    def _action(self, args: List[str]) -> Dict[str, Any]:
        """fmcluster's script with `args`, after the mounts script where there is one."""
        action = {"Script": self.s3_url, "Args": args}
        mounts = self.assets.mounts_url
        return action if mounts is None else {"Sequence": [{"Script": mounts}, action]}

    def compute_action(self, *, node_group: str) -> Dict[str, Any]:
        """A queue's ``CustomActions``: OnNodeConfigured validates the node with the group's published profile (its
        level and policy too). Nothing here changes with the runtime or the validation settings: a change of a
        queue's CustomActions replaces its compute nodes (QUEUE_UPDATE_STRATEGY)."""
        if node_group not in self.assets.profile_groups:
            raise ValueError(f"node_group: no profile published for {node_group!r}")
        return {"OnNodeConfigured": self._action(self._args("compute", node_group))}

    def head_action(self, *, node_group: str) -> Dict[str, Any]:
        """The head node's ``CustomActions``: OnNodeConfigured at its launch (constant), OnNodeUpdated after every
        update (its revision changes whenever the runtime, the script or the settings do)."""
        args = self._args("head", node_group)
        return {
            "OnNodeConfigured": self._action(args),
            "OnNodeUpdated": self._action(args + ["--event", "updated", "--revision", self.assets.revision]),
        }
