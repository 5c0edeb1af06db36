"""Node setup: the decisions the node-side shell scripts act on, one concept a module, standard library only
(python3 3.9+). HyperPod's lifecycle scripts (platforms/hyperpod/node/), ParallelCluster's OnNodeConfigured script
(orchestrators/parallelcluster/node/) and EKS node groups' user data run it as
``python3 -m fmcluster.runtime.node_setup COMMAND`` (cli.py lists the commands):

    parameters.py   fmcluster_parameters.json (HyperPod's lifecycle parameters) checked, defaults filled in
    identity.py     which node this is (role, group) and the settings its steps need
    storage.py      where container data goes (instance NVMe, HyperPod's EBS volume), fstab bind mounts, the EKS
                    nodes' mount unit that binds the instance NVMe's path onto nodeadm's array
    containers.py   docker's data-root and enroot's paths under that storage
    efa_units.py    the EFA counters' systemd units
    files.py        the package's error and its file helpers
"""
