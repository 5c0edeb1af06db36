"""The node-setup tool's command line: ``python3 -m fmcluster.runtime.node_setup COMMAND ...`` prints its answers as
``key<TAB>value`` lines (or ``changed``/``unchanged``), so shell scripts do the side effects and the decisions stay
unit-tested Python. Exit 0 ok, 1 a clear one-line reason on stderr, 2 usage.

HyperPod Slurm (on_init_complete.sh; ``workload_manager: slurm`` parameters):

- ``whoami --params F [--group G] [--resource-config F] [--root R] [--node-ip IP]... [--hostname H]``: this node's role
  (controller | login | compute), instance group, partition, GPU or not, and the settings every later step needs.
- ``users --params F``: validated users, one ``name uid home shell groups`` line each.
- ``user-keys --params F --name N``: that user's SSH public keys, one a line.

HyperPod on EKS (on_create_eks.sh; ``workload_manager: eks`` parameters):

- ``eks-node --params F --group G``: this node's group, GPU or not, the settings every later step needs, including
  the policy the boot validator applies on the node.

Any node (HyperPod, ParallelCluster, EKS node groups):

- ``storage-root [--root R]``: where container data goes: the instance NVMe (``/opt/dlami/nvme``), else HyperPod's
  secondary EBS volume (``/opt/sagemaker``), else nothing (never the root volume).
- ``docker-config --file F --data-root D``: merge ``data-root`` into docker's daemon.json.
- ``enroot-config --file F --base D``: point enroot's runtime/cache/data/temp paths under D.
- ``container-layout --base D``: containerd's, the kubelet's and the pod logs' directories and where under D they go.
- ``fstab-bind --file F --source S --target T --requires D [--after UNIT]``: the bind mount S -> T in fstab, once.
- ``efa-units --unit-dir D``: write the EFA counters' systemd units into D.
- ``bind-unit --unit-dir D --source S --target T --requires M [--root R]``: a systemd mount unit in D that binds S (a
  directory it creates on the mount point M, refused when M is not mounted) on T; prints ``unit`` (its name) and
  ``changed`` (1 or 0). EKS nodes put the instance NVMe's tier path on nodeadm's array with it.
- ``mounts --params F --dir D``: the HyperPod parameters' list of mounts (either workload manager), each script
  written to D; one ``store path script-file failure`` line each, in order.
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional

from fmcluster.runtime.node_setup.files import SetupError, load_json

# Each command imports only the modules it uses (inside main): a boot runs this tool a dozen times, and the
# parameters' validation (with the profile module and dataclasses) costs most of a start that storage-root or
# docker-config never needs.


def _emit(values: Dict[str, str]) -> None:
    for key, value in values.items():
        print(f"{key}\t{value}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m fmcluster.runtime.node_setup")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("whoami")
    p.add_argument("--resource-config", help="HyperPod's resource_config.json, when the node has one")
    p.add_argument("--group", help="the instance group the entry script names")
    p.add_argument("--params", required=True)
    p.add_argument("--root", default="/")
    p.add_argument("--node-ip", action="append", default=[], help="this node's address (default: discovered)")
    p.add_argument("--hostname", default="")
    u = sub.add_parser("users")
    u.add_argument("--params", required=True)
    k = sub.add_parser("user-keys")
    k.add_argument("--params", required=True)
    k.add_argument("--name", required=True)
    s = sub.add_parser("storage-root")
    s.add_argument("--root", default="/")
    d = sub.add_parser("docker-config")
    d.add_argument("--file", required=True)
    d.add_argument("--data-root", required=True)
    e = sub.add_parser("enroot-config")
    e.add_argument("--file", required=True)
    e.add_argument("--base", required=True)
    n = sub.add_parser("eks-node")
    n.add_argument("--params", required=True)
    n.add_argument("--group", required=True)
    c = sub.add_parser("container-layout")
    c.add_argument("--base", required=True)
    b = sub.add_parser("fstab-bind")
    b.add_argument("--file", required=True)
    b.add_argument("--source", required=True)
    b.add_argument("--target", required=True)
    b.add_argument("--requires", required=True)
    b.add_argument("--after", help="the systemd unit that mounts --requires, if no fstab line does")
    f = sub.add_parser("efa-units")
    f.add_argument("--unit-dir", required=True)
    m = sub.add_parser("bind-unit")
    m.add_argument("--unit-dir", required=True)
    m.add_argument("--source", required=True)
    m.add_argument("--target", required=True)
    m.add_argument("--requires", required=True)
    m.add_argument("--root", default="/")
    ms = sub.add_parser("mounts")
    ms.add_argument("--params", required=True)
    ms.add_argument("--dir", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "whoami":
            import socket

            from fmcluster.runtime.node_setup.identity import local_addresses, whoami

            addresses = args.node_ip or local_addresses(args.root)
            config = load_json(args.resource_config, "resource_config.json") if args.resource_config else None
            _emit(whoami(config, load_json(args.params, "fmcluster_parameters.json"),
                         addresses, args.hostname or socket.gethostname(), args.group))
        elif args.cmd in ("users", "user-keys"):
            from fmcluster.runtime.node_setup.parameters import users_of, validate_params

            users = users_of(validate_params(load_json(args.params, "fmcluster_parameters.json")))
            if args.cmd == "users":
                for x in users:
                    print("\t".join([x["name"], str(x["uid"]), x["home"], x["shell"], ",".join(x["groups"])]))
            else:
                for x in users:
                    if x["name"] == args.name:
                        print("\n".join(x["ssh_public_keys"]))
        elif args.cmd == "storage-root":
            from fmcluster.runtime.node_setup.storage import storage_root

            path, why = storage_root(args.root)
            print(f"{path or ''}\t{why}")
        elif args.cmd == "docker-config":
            from fmcluster.runtime.node_setup.containers import docker_config

            print("changed" if docker_config(args.file, args.data_root) else "unchanged")
        elif args.cmd == "enroot-config":
            from fmcluster.runtime.node_setup.containers import enroot_config

            print("changed" if enroot_config(args.file, args.base) else "unchanged")
        elif args.cmd == "eks-node":
            from fmcluster.runtime.node_setup.identity import eks_node

            _emit(eks_node(load_json(args.params, "fmcluster_parameters.json"), args.group))
        elif args.cmd == "container-layout":
            from fmcluster.runtime.node_setup.storage import container_layout

            for row in container_layout(args.base):
                print("\t".join(row))
        elif args.cmd == "fstab-bind":
            from fmcluster.runtime.node_setup.storage import fstab_bind

            print("changed" if fstab_bind(args.file, args.source, args.target, args.requires, args.after)
                  else "unchanged")
        elif args.cmd == "efa-units":
            from fmcluster.runtime.node_setup.efa_units import write_efa_units

            print("\n".join(write_efa_units(args.unit_dir)))
        elif args.cmd == "bind-unit":
            from fmcluster.runtime.node_setup.storage import bind_unit

            name, changed = bind_unit(args.unit_dir, args.source, args.target, args.requires, args.root)
            _emit({"unit": name, "changed": "1" if changed else "0"})
        elif args.cmd == "mounts":
            from fmcluster.runtime.node_setup.parameters import write_mounts

            for mount in write_mounts(load_json(args.params, "fmcluster_parameters.json"), args.dir):
                print("\t".join(mount))
    except SetupError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0

