"""The EFA counters' systemd units (runtime/observability/efa_textfile.py on a timer), written where a node's
systemd reads them: HyperPod on EKS nodes and EKS node groups take the same units from the runtime they fetched."""

from __future__ import annotations

import os
from typing import List

from fmcluster.runtime.node_setup.files import write_file
from fmcluster.runtime.observability import EFA_TEXTFILE_UNITS


def write_efa_units(unit_dir: str) -> List[str]:
    """Write the EFA counters' systemd units (the runtime's text) into `unit_dir`; their names."""
    for name, text in EFA_TEXTFILE_UNITS.items():
        write_file(os.path.join(unit_dir, name), text)
    return list(EFA_TEXTFILE_UNITS)
