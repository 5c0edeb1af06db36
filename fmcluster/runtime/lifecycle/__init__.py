"""SageMaker HyperPod (Slurm) lifecycle scripts: on_init_complete.sh does the side effects, node.py decides.

See README.md in this directory for what HyperPod runs on each node, what it configures itself, and
what these scripts still do (with sources, and what is unverified).
"""
