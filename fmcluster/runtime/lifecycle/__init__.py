"""Earlier names of node-side tools that moved, kept for what earlier releases wrote and still runs them: node.py
(the node-setup tool, which EKS launch templates run by this name) and the HyperPod lifecycle scripts (which entries
written before the scripts moved to platforms/hyperpod/node/ exec during the deploy that rewrites them)."""
