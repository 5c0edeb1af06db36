"""Kubernetes on an EKS control plane, for every kind that runs one (eks, hyperpod-eks): the control plane and its
add-ons, in-cluster objects, the EFA devices, the boot-validation node gate, exporters and the AMP managed scraper."""
