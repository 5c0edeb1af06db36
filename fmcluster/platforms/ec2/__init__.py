"""EC2 node groups: a placement group and an EFA launch template per spec node group, booting the node runtime."""
