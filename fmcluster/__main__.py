from fmcluster.cli import run

raise SystemExit(run())
