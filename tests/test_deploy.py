"""deploy/: the Kubernetes manifests pass the API schemas (kubernetes-validate, offline), and nginx.conf,
compose.yaml and the manifests name the same replicas. tests/e2e/test_replicas.py runs nginx.conf for real."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from proxy.downstream import REPLICA_ID_PATTERN

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
VALIDATE = Path(sys.executable).with_name("kubernetes-validate")
KUBERNETES = "1.30.0"


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

