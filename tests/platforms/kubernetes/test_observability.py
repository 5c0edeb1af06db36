"""orchestrator eks, observability: the AMP managed scraper of the cluster (two AZs, the nodes' security group, the
workspace, a configuration Prometheus accepts) collecting node_exporter with the validation and EFA textfiles,
dcgm-exporter and kube-state-metrics under the labels fmcluster's rules group by."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import resources_of

from fmcluster.platforms.kubernetes import metrics, versions
from fmcluster.platforms.kubernetes.scraper import ManagedScraper

ROOT = Path(__file__).resolve().parents[3]
INSTALL_SH = (ROOT / "fmcluster" / "runtime" / "observability" / "install.sh").read_text()
RULES = (ROOT / "fmcluster" / "observability" / "rules.yaml").read_text()


@pytest.fixture(scope="module")
def template(synth_example):
    return synth_example("eks-p5")["eks-p5-cluster"]


@pytest.fixture(scope="module")
def scraper(template):
    (found,) = resources_of(template, "AWS::APS::Scraper").values()
    return found["Properties"]


def test_scraper_reaches_the_cluster_from_two_azs_and_writes_to_the_workspace(scraper):
    eks = scraper["Source"]["EksConfiguration"]
    assert eks["ClusterArn"]["Fn::GetAtt"][1] == "Arn"
    assert len(eks["SubnetIds"]) == 2 and "Extra" in json.dumps(eks["SubnetIds"][1])
    assert "EfaSecurityGroup" in json.dumps(eks["SecurityGroupIds"])
    assert "eks-p5-observability" in json.dumps(scraper["Destination"]["AmpConfiguration"]["WorkspaceArn"])
    assert scraper["Alias"] == "fmcluster-eks-p5"


def test_scrape_configuration_is_the_rendered_one(scraper):
    config = ManagedScraper.decode(scraper["ScrapeConfiguration"]["ConfigurationBlob"])
    assert config == metrics.scrape_config(cluster="eks-p5", interval_s=30)
    assert config["global"]["scrape_interval"] == "30s"
    for job in config["scrape_configs"]:
        assert set(job) <= {"job_name", "honor_labels", "kubernetes_sd_configs", "relabel_configs"}, \
            "the managed scraper discovers with kubernetes_sd_configs only"


def test_promtool_accepts_the_configuration(tmp_path):
    """promtool parses everything but the service discovery: the distributions' promtool (make setup) is built
    without Kubernetes discovery, so each job's kubernetes_sd_configs is checked here and swapped for a static target
    there; the relabelling, regexes and intervals go through promtool."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: make setup installs it"
    config = metrics.scrape_config(cluster="eks-p5", interval_s=10)
    for job in config["scrape_configs"]:
        (sd,) = job.pop("kubernetes_sd_configs")
        assert sd["role"] in ("node", "pod") and set(sd) <= {"role", "namespaces"}
        job["static_configs"] = [{"targets": ["127.0.0.1:9100"]}]
    path = tmp_path / "scrape.yml"
    path.write_text(yaml.safe_dump(config))
    r = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert metrics.scrape_config(cluster="c", interval_s=10)["global"]["scrape_interval"] == "30s", "AMP's minimum"


def test_series_get_the_labels_the_rules_group_by():
    config = metrics.scrape_config(cluster="eks-p5", interval_s=30)
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert re.search(r'up\{job=~"node\|dcgm"\}', RULES), "the exporter-down rule names these jobs"
    grouped = set(re.findall(r"by \(([^)]*)\)", RULES))
    used = {label.strip() for group in grouped for label in group.split(",")}
    for name in ("node", "dcgm"):
        targets = {r.get("target_label") for r in jobs[name]["relabel_configs"]}
        assert {"cluster", "node", "node_group", "instance_type"} <= targets
        assert {"cluster", "node", "node_group", "instance_type"} & used
    node_rule = jobs["node"]["relabel_configs"][2]
    assert re.match(node_rule["regex"], "ip-10-4-1-23.ec2.internal").group(1) == "ip-10-4-1-23"
    assert jobs["node"]["relabel_configs"][0]["source_labels"] == ["__meta_kubernetes_node_label_fmcluster_io_node_group"]


def test_the_scraper_writes_with_amps_own_role_not_a_cross_account_pair(template, scraper):
    """RoleConfiguration is AMP's cross-account setup ("Use this structure to enable cross-account access"); in one
    account the collector writes with AMP's service-linked role, and the workspace's key is AMP's to use."""
    assert "RoleConfiguration" not in scraper
    assert not [k for k in resources_of(template, "AWS::IAM::Role") if k.startswith("EksScraper")]
    assert "scraper.aps.amazonaws.com" not in json.dumps(template["Resources"])


def test_exporters_are_the_versions_the_other_nodes_run():
    node = re.search(r'NODE_EXPORTER_VERSION="([^"]+)"', INSTALL_SH).group(1)
    assert versions.NODE_EXPORTER_IMAGE.endswith(f":v{node}")
    image = re.search(r'DCGM_EXPORTER_IMAGE="([^"]+)"', INSTALL_SH).group(1)
    digest = re.search(r'DCGM_EXPORTER_DIGEST="([^"]+)"', INSTALL_SH).group(1)
    assert versions.DCGM_EXPORTER_IMAGE == f"{image}@{digest}"


def test_exporters_read_the_nodes_textfiles_and_ksm_reads_no_secrets(template):
    objects = next(json.loads(r["Properties"]["Manifest"]) for k, r in
                   resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").items() if k.startswith("EksObjectsExporters"))
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    node = by_name[("DaemonSet", "node-exporter")]["spec"]["template"]["spec"]
    assert {"name": "textfile", "hostPath": {"path": "/var/lib/node_exporter/textfile_collector",
                                             "type": "DirectoryOrCreate"}} in node["volumes"]
    assert "--collector.textfile.directory=/host/textfile" in node["containers"][0]["args"]
    dcgm = by_name[("DaemonSet", "dcgm-exporter-hopper")]["spec"]["template"]["spec"]
    assert dcgm["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "resources" not in json.dumps(dcgm["containers"][0]["resources"].get("requests", {})).replace(
        "cpu", "").replace("memory", ""), "claims no GPU"
    role = by_name[("ClusterRole", "fmcluster-kube-state-metrics")]
    for rule in role["rules"]:
        assert rule["verbs"] == ["list", "watch"] and "secrets" not in rule["resources"]


def test_efa_textfile_timer_on_efa_nodes(template):
    lt = next(r["Properties"]["LaunchTemplateData"] for k, r in resources_of(template, "AWS::EC2::LaunchTemplate").items()
              if k.startswith("EksNodesH100"))
    text = "".join(p for p in lt["UserData"]["Fn::Base64"]["Fn::Join"][1] if isinstance(p, str))
    # the units' text comes from the runtime the node fetched (a collector change leaves the template alone)
    assert "fmcluster.runtime.lifecycle.node efa-units --unit-dir /etc/systemd/system" in text
    assert "enable --now fmcluster-efa-textfile.timer" in text


def test_dcgm_exporter_collects_each_gpu_architectures_fields_on_its_nodes():
    """The host collectors' field list, per architecture (NVLink error counters, profiling fields): one exporter per
    architecture, each on the nodes of its instance types, with the same CSV a host collector writes."""
    from fmcluster.runtime.observability import dcgm_fields

    objects = metrics.dcgm_exporter(["p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"])
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert set(by_name) == {("ConfigMap", "dcgm-exporter-hopper"), ("DaemonSet", "dcgm-exporter-hopper"),
                            ("ConfigMap", "dcgm-exporter-blackwell"), ("DaemonSet", "dcgm-exporter-blackwell")}
    for arch, types in (("hopper", ["p5.48xlarge", "p5en.48xlarge"]), ("blackwell", ["p6-b200.48xlarge"])):
        fields = by_name[("ConfigMap", f"dcgm-exporter-{arch}")]["data"]["counters.csv"]
        assert fields == dcgm_fields.field_list(types[0])[0] and "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in fields
        pod = by_name[("DaemonSet", f"dcgm-exporter-{arch}")]["spec"]["template"]["spec"]
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [{"key": "fmcluster.io/instance-type", "operator": "In", "values": types}]
        assert pod["volumes"][0] == {"name": "counters", "configMap": {"name": f"dcgm-exporter-{arch}"}}
