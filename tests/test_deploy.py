"""deploy/: the Kubernetes manifests pass the API schemas (kubernetes-validate, offline), and nginx.conf,
compose.yaml and the manifests name the same replicas. tests/e2e/test_replicas.py runs nginx.conf for real.
The Prometheus alert rules and every Grafana query pass Prometheus's own parser (`promtool`, Debian's
`prometheus` package), and the rules fire as their unit tests say; tests/e2e/test_monitoring.py checks
that each series they name is one `/metrics` exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxy.downstream import REPLICA_ID_PATTERN

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
VALIDATE = Path(sys.executable).with_name("kubernetes-validate")
KUBERNETES = "1.30.0"
RULES = DEPLOY / "prometheus" / "rules.yaml"
DASHBOARD = DEPLOY / "grafana" / "toolbridge.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None,
                                    reason="needs promtool (Debian's prometheus package; .ci/run installs it)")
# What Grafana puts in a query before Prometheus sees it.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$instance": ".*"}


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VALIDATE), "--strict", "-k", KUBERNETES, str(path)], capture_output=True, text=True,
                          timeout=120)


def documents() -> list[dict]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_every_manifest_passes_the_kubernetes_schemas_strictly(tmp_path: Path) -> None:
    assert [p.name for p in MANIFESTS] == ["config.yaml", "nginx.yaml", "redis.yaml", "secret.yaml", "toolbridge.yaml"]
    for path in MANIFESTS:
        checked = validate(path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = tmp_path / "broken.yaml"
    typo = (DEPLOY / "kubernetes" / "toolbridge.yaml").read_text().replace("containerPort:", "containerPrt:")
    broken.write_text(typo)
    assert validate(broken).returncode != 0


def test_kustomization_lists_every_manifest_and_the_nginx_config() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [f"kubernetes/{p.name}" for p in MANIFESTS]
    assert kustomization["configMapGenerator"] == [{"name": "toolbridge-nginx", "files": ["nginx.conf"]}]


def nginx_replicas() -> tuple[list[str], list[str], list[str]]:
    """The map's markers, the round-robin pool's servers, and the per-replica upstream blocks."""
    text = (DEPLOY / "nginx.conf").read_text()
    markers = re.findall(r'"~\^([\w-]+)\\\."\s+([\w-]+);', text)
    assert all(marker == pool for marker, pool in markers)
    pool = re.search(r"upstream toolbridge \{(.*?)\}", text, re.S)
    assert pool is not None
    servers = re.findall(r"server ([\w-]+):8765", pool.group(1))
    blocks = re.findall(r"upstream (toolbridge-\d+) \{\s*zone [\w-]+ 64k;\s*server ([\w-]+):8765", text)
    assert all(name == home for name, home in blocks)
    return [m for m, _ in markers], servers, [name for name, _ in blocks]


def test_nginx_compose_and_kubernetes_name_the_same_replicas() -> None:
    markers, servers, blocks = nginx_replicas()
    replicas = ["toolbridge-0", "toolbridge-1", "toolbridge-2"]
    assert markers == servers == blocks == replicas
    assert all(re.fullmatch(REPLICA_ID_PATTERN, r) for r in replicas)

    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    assert set(compose) == {*replicas, "redis", "nginx"}
    for replica in replicas:
        command = compose[replica]["command"]
        assert command[command.index("--replica-id") + 1] == replica
        assert compose[replica]["environment"]["TOOLBRIDGE_REDIS_URL"] == "redis://redis:6379/0"

    by_kind: dict[str, list[dict]] = {}
    for doc in documents():
        by_kind.setdefault(doc["kind"], []).append(doc)
    statefulset = next(d for d in by_kind["StatefulSet"] if d["metadata"]["name"] == "toolbridge")
    assert [f"toolbridge-{i}" for i in range(statefulset["spec"]["replicas"])] == replicas
    per_pod = {d["metadata"]["name"]: d["spec"]["selector"] for d in by_kind["Service"]
               if "statefulset.kubernetes.io/pod-name" in d["spec"]["selector"]}
    assert per_pod == {r: {"statefulset.kubernetes.io/pod-name": r} for r in replicas}
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in container["env"]}
    assert env["TOOLBRIDGE_REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["TOOLBRIDGE_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "toolbridge-auth"



def dashboard_queries() -> list[str]:
    """Every PromQL query of the dashboard, with Grafana's variables filled in."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    queries = [target["expr"] for panel in panels for target in panel["targets"]]
    for variable, value in GRAFANA_VARIABLES.items():
        queries = [query.replace(variable, value) for query in queries]
    return queries


def rule_queries() -> list[str]:
    return [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def promtool(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PROMTOOL), *arguments], capture_output=True, text=True, timeout=60)


@needs_promtool
def test_the_alert_rules_parse_and_fire_as_their_unit_tests_say() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(DEPLOY / "prometheus" / "rules.test.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    names = [rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    assert names == ["ToolbridgeUpstreamParked", "ToolbridgeUpstreamErrorRatio", "ToolbridgeUpstreamSlow",
                     "ToolbridgeToolChangePending"]


@needs_promtool
def test_every_dashboard_query_parses_as_promql(tmp_path: Path) -> None:
    """Each query, as a recording rule, through `promtool check rules` (Prometheus's PromQL parser)."""
    def check(queries: list[str]) -> subprocess.CompletedProcess[str]:
        rules = [{"record": f"dashboard:query_{i}", "expr": query} for i, query in enumerate(queries)]
        path = tmp_path / "dashboard-rules.yaml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
        return promtool("check", "rules", str(path))

    queries = dashboard_queries()
    assert len(queries) >= 12
    checked = check(queries)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert check([*queries, "sum by (server (toolbridge_tool_calls_total)"]).returncode != 0
