"""FSx for Lustre on the node, for the boot validator: its mounts (fstype lustre: the lustre module loaded, the
remedy), whether they answer (storage.lustre_answers) and the client's imports and LNet on EFA
(storage.lustre_imports), with the parsers of `lctl get_param` and `lnetctl net show` they read. The validator imports
this module by layout (fmcluster/runtime/stores.py); standard library and the runtime only."""

from __future__ import annotations

import re
import threading
from typing import Dict, List, Optional, Tuple

from fmcluster.runtime.checks.registry import Ctx, MountKind, Result, bad, check, mount_kind, ok, skip
from fmcluster.runtime.node import ProbeError
from fmcluster.runtime.probes.mounts import NETWORK_FS, mounts

HELPER = "fmcluster.runtime.lustre"  # the mount helper, by the name nodes run it (runtime/lustre.py forwards)
LUSTRE_REMEDY = ("mount the file system (check the lustre client for this kernel, the FSx security group, and the "
                 "lifecycle script that mounts it)")
NETWORK_FS.append("lustre")


def _module_loaded(ctx: Ctx, m: Dict[str, object], got: Tuple[str, str, str]) -> str:
    return "" if ctx.node.exists("/sys/module/lustre") else f"{m['path']}: lustre module not loaded"


# Profiles without an fstype meant Lustre, the one shared file system there was.
mount_kind(MountKind("lustre", LUSTRE_REMEDY, problem=_module_loaded, untyped=True))


def _lustre(m: Dict[str, object]) -> bool:
    return m.get("fstype", "lustre") == "lustre"


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


@check("storage.lustre_answers", "storage", level="standard",
       applies=lambda p: any(_lustre(m) for m in p.mounts),
       title="Lustre answers (lfs df under a timeout)")
def lustre_answers(ctx: Ctx) -> Result:
    table = mounts(ctx)
    problems, good = [], []
    for m in ctx.profile.mounts:
        path = m["path"]
        if not _lustre(m) or table.get(path, ("", ""))[1] != "lustre":
            continue
        res = ctx.node.run(("lfs", "df", path))
        if res.error:
            raise ProbeError(res.why())
        text = res.stdout + res.stderr
        if res.rc != 0 or "filesystem_summary" not in text:
            problems.append(f"{path}: {res.why()}")
        elif "inactive device" in text or "Resource temporarily unavailable" in text:
            problems.append(f"{path}: a target is unreachable")
        else:
            good.append(path)
    if not good and not problems:
        return skip("no lustre file system mounted (see storage.mounts)")
    if problems:
        return bad("; ".join(problems), "all targets answer", "check FSx health and the EFA/TCP path to it; remount")
    return ok(", ".join(good), "all targets answer")


EFA_REMEDY = ("LNet is not on EFA for an EFA-enabled FSx file system: unmount it and run "
              f"`python3 -m {HELPER} mount --efa ...` (loads kefalnd, adds the efa NIs), or check the "
              "Lustre client has kefalnd for this kernel")


def _lustre_mounted(ctx: Ctx) -> List[Dict[str, object]]:
    """Profile mounts of fstype lustre that /proc/mounts shows mounted as lustre."""
    table = mounts(ctx)
    return [m for m in ctx.profile.mounts
            if _lustre(m) and table.get(str(m["path"]), ("", ""))[1] == "lustre"]


def _lnet_efa_problems(ctx: Ctx) -> Tuple[List[str], str]:
    """Problems with LNet over EFA (kefalnd loaded, an efa net with an NI up) and what was seen."""
    if not ctx.node.exists("/sys/module/kefalnd"):
        return ["kefalnd (the EFA LND) is not loaded"], "kefalnd not loaded"
    res = ctx.node.run(LNET_SHOW)
    if res.error:
        raise ProbeError(res.why())
    text = res.stdout + res.stderr
    if res.rc != 0:
        if "Network is down" in text:
            return ["LNet is down (lnetctl net show: Network is down)"], "LNet down"
        raise ProbeError(res.why())
    nets = parse_lnet_nets(res.stdout)
    if not nets:
        raise ProbeError(f"lnetctl net show output not understood: {text.strip()[:100]!r}")
    efa = [ni for t, nis in nets.items() if re.fullmatch(r"efa\d*", t) for ni in nis]
    up = [ni for ni in efa if ni["status"] == "up"]
    seen = f"LNet nets {', '.join(sorted(nets))}; efa NIs up: {len(up)} of {len(efa)}"
    if not efa:
        return ["LNet has no efa net (Lustre traffic goes over TCP)"], seen
    if not up:
        down = ", ".join(f"{ni['nid']} {ni['status']}" for ni in efa)
        return [f"no efa NI is up ({down})"], seen
    return [], seen


@check("storage.lustre_imports", "storage", level="standard",
       applies=lambda p: any(_lustre(m) for m in p.mounts),
       title="Lustre client imports FULL (lctl), LNet on EFA where the mount is EFA-enabled")
def lustre_imports(ctx: Ctx) -> Result:
    mounted = _lustre_mounted(ctx)
    if not mounted:
        return skip("no lustre file system mounted (see storage.mounts)")
    want_efa = [str(m["path"]) for m in mounted if m.get("efa") is True]
    if want_efa and ctx.node.exists("/sys/module/kefalnd"):
        # lnetctl runs beside lctl (Node.run shares the one call): a slow tool costs its own time, not the sum
        threading.Thread(target=ctx.node.run, args=(LNET_SHOW,), daemon=True).start()
    res = ctx.node.run(LCTL_IMPORTS)
    if res.error:
        raise ProbeError(res.why())
    imports = parse_imports(res.stdout)
    if not imports:
        raise ProbeError(res.why() if res.rc != 0 else f"lctl get_param printed no import: "
                                                         f"{(res.stdout + res.stderr).strip()[:100]!r}")
    unhealthy = [f"{target} {state}" for target, state in imports if state not in HEALTHY_IMPORT]
    states = sorted({state for _, state in imports})
    observed = f"{len(imports)} imports ({', '.join(states)})"
    expected = "every import FULL (or IDLE)"
    efa_problems: List[str] = []
    if want_efa:
        efa_problems, seen = _lnet_efa_problems(ctx)
        observed += f"; {seen}"
        expected += f"; LNet efa net up for {', '.join(want_efa)}"
    if unhealthy or efa_problems:
        remedies = []
        if unhealthy:
            remedies.append("a Lustre target is not connected: check the FSx file system's health, its security "
                            "group and the network path; remount if it does not recover")
        if efa_problems:
            remedies.append(EFA_REMEDY)
        return bad("; ".join(unhealthy + efa_problems), expected, "; ".join(remedies),
                   detail=observed if not unhealthy else "")
    return ok(observed, expected)
