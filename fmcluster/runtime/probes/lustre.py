"""Lustre client probes: the output of `lctl get_param` (client imports) and `lnetctl net show` (LNet nets) parsed.

(The node-side mount helper is fmcluster.runtime.lustre; this module only reads.)
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..node import ProbeError

# `lctl get_param -n osc.*.import mdc.*.import`: one YAML-like block per client import, as printed by
# lprocfs_import_seq_show() (lustre/obdclass/lprocfs_status.c): "import:" then "    name: <fs>-OST0000-osc-<id>",
# "    target: <fs>-OST0000_UUID", "    state: FULL", connect_flags, connection (failover_nids, current_connection)...
# States (ptlrpc_import_state_name, lustre_import.h): CLOSED NEW DISCONN CONNECTING REPLAY REPLAY_LOCKS REPLAY_WAIT
# RECOVER FULL EVICTED IDLE. IDLE is healthy: since Lustre 2.12 an OSC import with no traffic for osc.*.idle_timeout
# disconnects on purpose and reconnects on the next RPC (a real 2.12.7 client import shows "state: IDLE" with
# "idle: 159490 sec").
LCTL_IMPORTS = ("lctl", "get_param", "-n", "osc.*.import", "mdc.*.import")
HEALTHY_IMPORT = ("FULL", "IDLE")
# `lnetctl net show`: "net:" then "    - net type: efa", "      local NI(s):", "        - nid: <ip>@efa",
# "          status: up", "          interfaces:", "              0: rdmap79s0" (lnetctl YAML; newer lnetctl prints
# the list dashes flush left: "-     net type: tcp"; both are read).
LNET_SHOW = ("lnetctl", "net", "show")


def parse_imports(text: str) -> List[Tuple[str, str]]:
    """(target, state) per import block; ProbeError when a block has no state."""
    found = []
    for block in re.split(r"^\s*import:\s*$", text, flags=re.M)[1:]:
        state = re.search(r"^\s*state:\s*(\S+)", block, re.M)
        who = re.search(r"^\s*target:\s*(\S+)", block, re.M) or re.search(r"^\s*name:\s*(\S+)", block, re.M)
        if state is None:
            raise ProbeError(f"lctl import block without a state: {block.strip()[:100]!r}")
        found.append((who.group(1) if who else "?", state.group(1)))
    return found


def parse_lnet_nets(text: str) -> Dict[str, List[Dict[str, object]]]:
    """net type -> its local NIs ({"nid", "status", "interfaces"}) from `lnetctl net show`."""
    nets: Dict[str, List[Dict[str, object]]] = {}
    cur: Optional[List[Dict[str, object]]] = None
    ni: Optional[Dict[str, object]] = None
    for line in text.splitlines():
        m = re.match(r"^[\s-]*net type:\s*(\S+)", line)
        if m:
            cur, ni = nets.setdefault(m.group(1), []), None
            continue
        m = re.match(r"^[\s-]*nid:\s*(\S+)", line)
        if m and cur is not None:
            ni = {"nid": m.group(1), "status": "?", "interfaces": []}
            cur.append(ni)
            continue
        m = re.match(r"^[\s-]*status:\s*(\S+)", line)
        if m and ni is not None:
            ni["status"] = m.group(1)
            continue
        m = re.match(r"^\s*\d+:\s*(\S+)\s*$", line)
        if m and ni is not None:
            ifs = ni["interfaces"]
            assert isinstance(ifs, list)
            ifs.append(m.group(1))
    return nets
