"""``python3 -m fmcluster.runtime.<this file's name> ...``: the store's mount helper of the same file name, under the
name launch templates run it by.

EC2 nodes' user data runs the helper by this name (the boot lines a store renders), so keeping the name keeps launch
templates byte-identical when the helper moves or changes (docs/changes.md, "Routine changes"). The helper lives in
its store's node folder, found by its file name (fmcluster/runtime/stores.py); this module names no store."""

import runpy
from pathlib import Path

from fmcluster.runtime.stores import node_module_name

if __name__ == "__main__":
    runpy.run_module(node_module_name(Path(__file__).stem), run_name="__main__", alter_sys=True)
