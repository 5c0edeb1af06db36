"""``python3 -m fmcluster.runtime.lifecycle.node COMMAND``: the node-setup tool (fmcluster.runtime.node_setup) under
the name earlier releases gave it.

Launch templates carry this name (EKS node groups' user data runs ``... lifecycle.node efa-units``), and so do the
ParallelCluster scripts and HyperPod lifecycle scripts of earlier releases, which read the newest runtime their
pointer or settings name. Keeping the name lets a new runtime leave launch templates byte-identical
(docs/changes.md, "Routine changes") and keeps such nodes booting; new code calls fmcluster.runtime.node_setup."""

import sys

from fmcluster.runtime.node_setup.cli import main

if __name__ == "__main__":
    sys.exit(main())
