"""The way in to a private EKS API endpoint: a Session Manager port forward through a node inside the VPC (the
nodes reach the endpoint, or they could not join), then kubectl against localhost with the endpoint's name for TLS.

AWS-StartPortForwardingSessionToRemoteHost forwards a local port to a host the target instance reaches (Systems
Manager user guide, "Start a session", port forwarding to remote hosts); kubectl's ``--tls-server-name`` keeps the
certificate check against the endpoint's own name (kubectl config set-cluster). The alternative is
``endpoint: {public: true, public_access_cidrs: [...]}`` (EKS user guide, "Cluster API server endpoint").
"""

from __future__ import annotations

from typing import List

LOCAL_PORT = 8443


def tunnel_command(*, region: str, target: str, endpoint_host: str) -> str:
    """Forward localhost:8443 to the API endpoint through the Session Manager `target` (keep it running)."""
    return (f"aws ssm start-session --region {region} --target {target} "
            "--document-name AWS-StartPortForwardingSessionToRemoteHost "
            f"--parameters host={endpoint_host},portNumber=443,localPortNumber={LOCAL_PORT}")


def kubeconfig_commands(*, region: str, cluster: str, endpoint_host: str) -> List[str]:
    """Write the kubeconfig entry (as an admin's credentials), then point it at the tunnel."""
    return [f"aws eks update-kubeconfig --region {region} --name {cluster}",
            f"kubectl config set-cluster \"$(kubectl config current-context)\" --server=https://127.0.0.1:{LOCAL_PORT} "
            f"--tls-server-name={endpoint_host}"]


def endpoint_host_command(*, region: str, cluster: str) -> str:
    return (f"aws eks describe-cluster --region {region} --name {cluster} --query cluster.endpoint --output text "
            "| cut -d/ -f3")


def way_in(*, region: str, cluster: str, public: bool, target: str) -> List[str]:
    """The commands, in order, from a machine with an admin's credentials to a working kubectl. `target`: the
    Session Manager target (shell) of a node inside the VPC."""
    if public:
        return ["# the API endpoint is public to endpoint.public_access_cidrs; from an address there, as an admin:",
                f"aws eks update-kubeconfig --region {region} --name {cluster}"]
    return ["# the API endpoint is private: forward a local port to it through a node in the VPC (keep it running),",
            "# then point kubectl at the tunnel from another shell, as an admin:",
            f"HOST=$({endpoint_host_command(region=region, cluster=cluster)})",
            tunnel_command(region=region, target=target, endpoint_host="$HOST"),
            *kubeconfig_commands(region=region, cluster=cluster, endpoint_host="$HOST")]
