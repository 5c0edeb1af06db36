"""``python3 -m fmcluster.runtime.node_setup COMMAND``: cli.py says which commands there are."""

import sys

from fmcluster.runtime.node_setup.cli import main

sys.exit(main())
