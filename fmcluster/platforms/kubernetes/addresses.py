"""VPC addresses a Kubernetes node takes beyond its own interfaces."""

# Pod addresses per node under the VPC CNI, which the node subnet must hold beside the nodes' own interfaces: the
# add-on keeps MINIMUM_IP_TARGET (16) addresses per node plus a WARM_IP_TARGET (4) margin (cluster.py's VPC_CNI_ENV
# sets both).
POD_ADDRESSES_PER_NODE = 24
