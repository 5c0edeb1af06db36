"""EFA metrics for node_exporter's textfile collector, read from sysfs (no tools, no network).

    python3 -m fmcluster.runtime.observability.efa_textfile [--root DIR] [--out FILE]

For every RDMA device whose driver is ``efa`` (NVLink ``ibp*`` devices on p6 are not EFA and are skipped):
``fmcluster_efa_port_active{device,port}`` (ports/<p>/state is ACTIVE) and
``fmcluster_efa_hw_stat_total{device,port,counter}`` for each file in ports/<p>/hw_counters
(rx_drops, retrans_timeout_events, unresponsive_remote_events, impaired_remote_conn_events, tx_bytes, ...;
EC2 user guide, "Monitor an EFA"), plus ``fmcluster_efa_devices``. Exit 0 written, 1 the file could not be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Tuple

from fmcluster.runtime.observability import EFA_PROM_FILE
from fmcluster.runtime.observability.textfile import Sample, emit, family

IB_CLASS = "sys/class/infiniband"


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def efa_devices(root: str) -> List[str]:
    base = os.path.join(root, IB_CLASS)
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    found = []
    for name in names:
        driver = os.path.join(base, name, "device", "driver")
        if os.path.basename(os.path.realpath(driver)) == "efa":
            found.append(name)
    return found


def collect(root: str = "/") -> Tuple[int, List[Sample], List[Sample]]:
    """(device count, port-active samples, hw counter samples)."""
    devices = efa_devices(root)
    ports: List[Sample] = []
    counters: List[Sample] = []
    for dev in devices:
        port_dir = os.path.join(root, IB_CLASS, dev, "ports")
        try:
            port_names = sorted(os.listdir(port_dir))
        except OSError:
            continue
        for port in port_names:
            state = _read(os.path.join(port_dir, port, "state")) or ""
            # "4: ACTIVE"
            ports.append(({"device": dev, "port": port}, 1 if state.upper().endswith("ACTIVE") else 0))
            hw = os.path.join(port_dir, port, "hw_counters")
            try:
                names = sorted(os.listdir(hw))
            except OSError:
                continue
            for counter in names:
                raw = _read(os.path.join(hw, counter))
                if raw is None:
                    continue
                try:
                    value = int(raw)
                except ValueError:
                    continue
                counters.append(({"device": dev, "port": port, "counter": counter}, value))
    return len(devices), ports, counters


def render(count: int, ports: List[Sample], counters: List[Sample]) -> str:
    lines = family("fmcluster_efa_devices", "gauge", "EFA devices found in /sys/class/infiniband.", [({}, count)])
    lines += family("fmcluster_efa_port_active", "gauge", "1 when the EFA port state is ACTIVE.", ports)
    lines += family(
        "fmcluster_efa_hw_stat_total", "counter", "EFA hardware counter from ports/<port>/hw_counters.", counters
    )
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="efa_textfile", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/")
    ap.add_argument("--out", default=EFA_PROM_FILE, help="textfile to write ('-' for stdout)")
    args = ap.parse_args(argv)
    return emit(render(*collect(args.root)), args.out, "efa_textfile")


if __name__ == "__main__":
    sys.exit(main())
