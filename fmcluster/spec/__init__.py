"""The cluster spec: the one place user input is validated.

A spec is YAML the user writes (examples/*.yaml). Reading it turns it into a frozen `ClusterSpec` or raises
`SpecError` whose `problems` are one line each, ``field.path: what is wrong and what is allowed``. Unknown keys are
errors so typos never pass silently. Constructs trust a `ClusterSpec`; they re-validate nothing.

One module per section (network, node_group, storage, observability, validation, checkpoints). The ``orchestrator`` section
belongs to each orchestrator kind (fmcluster/orchestrators/), whose settings build on `fmcluster.spec.orchestrator`;
the spec never lists the kinds: `fmcluster.registry` composes the model (`loading.spec_model`) and reads specs with it.
"""

from fmcluster.spec.base import SpecError
from fmcluster.spec.checkpoints import Checkpoints
from fmcluster.spec.cluster import SCHEMA_URL, ClusterSpec
from fmcluster.spec.network import ExistingVpc, Network, NewVpc, private_subnet_prefix
from fmcluster.spec.node_group import Capacity, NodeGroup, Placement
from fmcluster.spec.observability import Observability
from fmcluster.spec.storage import Storage
from fmcluster.spec.validation import Validation

__all__ = [
    "Capacity",
    "Checkpoints",
    "ClusterSpec",
    "ExistingVpc",
    "Network",
    "NewVpc",
    "NodeGroup",
    "Observability",
    "Placement",
    "SCHEMA_URL",
    "SpecError",
    "Storage",
    "Validation",
    "private_subnet_prefix",
]
