"""The node trees tests share: whatever one test did to its tree, the next gets the committed fixture back, byte for
byte, with every mode and link target, and nothing else in it."""

from __future__ import annotations

import os

from .conftest import NODES, _entries, reset_tree


def test_a_reset_tree_is_the_fixture_again_whatever_was_done_to_it(make_node):
    node = make_node("p5.48xlarge")
    healthy = _entries(NODES / "p5.48xlarge-healthy")
    assert _entries(node.base) == healthy
    (node.root / "sys/module/nvidia/version").write_text("570.1.1\n")  # written in place
    node.append("/dev/kmsg", "NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.\n")
    (node.bin / "fi_info").chmod(0o644)
    node.remove("/usr/local/cuda")  # a directory tree
    node.remove("/sys/module/gdrdrv")
    (node.root / "sys/module/gdrdrv").write_text("a file where a directory was\n")
    node.write("/etc/new/file.conf", "added\n")  # a new directory with a file
    link = node.root / "sys/bus/pci/devices/0000:51:00.0/driver"
    assert link.is_symlink()
    link.unlink()
    link.symlink_to("/elsewhere")
    os.mkfifo(node.base / "fifo")
    (node.base / "profile.json").write_text("{}")
    assert _entries(node.base) != healthy

    assert reset_tree(node.base, healthy) > 0
    assert _entries(node.base) == healthy
    assert reset_tree(node.base, healthy) == 0  # nothing left to put back


def test_two_nodes_of_one_type_in_one_test_are_two_trees(make_node):
    first, second = make_node("p5.48xlarge"), make_node("p5.48xlarge")
    assert first.base != second.base
    first.write("/etc/only-here", "x\n")
    assert not (second.root / "etc/only-here").exists()
