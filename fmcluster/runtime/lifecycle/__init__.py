"""The node-setup tool's earlier name, kept for launch templates and scripts that run it (node.py says why)."""
