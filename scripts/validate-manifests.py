#!/usr/bin/env python3
"""Validates PushBridge's deployment manifests (make lint-deploy).

Every YAML document of the given files is checked against a schema, and none is skipped:
- Kubernetes' own kinds against the schemas bundled with kubernetes-validate, in strict mode
  (unknown fields are errors) for the Kubernetes version given with --kubernetes-version;
- custom resources (ServiceMonitor, PrometheusRule, ScaledObject, Kustomization) against the small schemas
  shipped in deploy/schemas/ (see deploy/schemas/README.md).
A kind with no schema is an error.

With --compose FILE it checks a docker-compose file's references (services, volumes, mounted files).

With --dashboard FILE it checks a Grafana dashboard (deploy/grafana/pushbridge.json): it parses, its panels have
unique ids and fit the 24-column grid, every query uses the dashboard's Prometheus data source variable, and every
PushBridge metric a query names is one the bridge exports.

METRICS below must list exactly the metrics of docs/operations.md's table (checked on every run), so alerts,
the dashboard and the documentation cannot drift apart.

With --consistency DIR it also checks that the files in DIR (deploy/kubernetes) agree with each other and
with the configuration they deploy (DIR/pushbridge.yaml): the grace period outlasts the drain timeout, the
KEDA triggers watch the configured group and input topics, the probes use admin.listen's port, and the
kustomization lists every manifest.

Exit status: 0 when everything is valid, 1 otherwise (every problem is printed as FILE: RESOURCE: message).
"""

import argparse
import json
import pathlib
import re
import sys

import jsonschema
import kubernetes_validate.utils as kubernetes
import yaml

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent
SCHEMAS = REPOSITORY / "deploy" / "schemas"
# The metrics PushBridge exports (docs/operations.md "Metrics", docs/deployment.md); alerts may only use these.
METRICS = {
    "pushbridge_events_consumed_total", "pushbridge_events_unmatched_total", "pushbridge_notifications_total",
    "pushbridge_dead_letters_total", "pushbridge_invalid_tokens_total", "pushbridge_apns_request_duration_seconds",
    "pushbridge_apns_request_duration_seconds_bucket", "pushbridge_apns_request_duration_seconds_sum",
    "pushbridge_apns_request_duration_seconds_count", "pushbridge_in_flight", "pushbridge_consumer_lag",
    "pushbridge_apns_connections", "pushbridge_halted", "pushbridge_in_flight_bytes",
    "pushbridge_lane_held_back_partitions",
    "pushbridge_oldest_unfinished_seconds", "pushbridge_unpublished_records", "pushbridge_ordering_max_waiting",
    "pushbridge_feedback_tokens_total", "pushbridge_feedback_tokens_skipped_total",
    "pushbridge_feedback_poll_failures_total", "pushbridge_config_reloads_total", "pushbridge_config_info",
    "pushbridge_credential_expiry_seconds", "pushbridge_credential_loaded_seconds",
}
# Series a histogram adds to its name.
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def documented_metrics(path):
    """The metric names of the table in docs/operations.md (rows starting with | `pushbridge_...`)."""
    return set(re.findall(r"^\| `(pushbridge_[a-z_]+)`", path.read_text(), flags=re.MULTILINE))


def metrics_problems(path):
    """METRICS against the documented table: a metric on one side only is a problem."""
    exported = {name for name in METRICS
                if not name.endswith(HISTOGRAM_SUFFIXES) or name[: name.rfind("_")] not in METRICS}
    documented = documented_metrics(path)
    problems = [f"{path}: {name} is documented but missing from METRICS in {pathlib.Path(__file__).name}"
                for name in sorted(documented - exported)]
    problems += [f"{path}: {name} is in METRICS but not in the metrics table" for name in sorted(exported - documented)]
    return problems


def expression_problems(where, expression):
    """Unknown PushBridge metrics and unbalanced brackets in a PromQL expression."""
    problems = [f"{where}: {metric} is not a PushBridge metric"
                for metric in sorted(set(re.findall(r"\bpushbridge_[a-z_]+", expression)) - METRICS)]
    for opening, closing in ("()", "[]", "{}"):
        if expression.count(opening) != expression.count(closing):
            problems.append(f"{where}: unbalanced {opening}{closing} in expr")
    return problems


def dashboard_problems(path):
    """Problems of a Grafana dashboard: structure, grid, data source, and the metrics its queries name."""
    try:
        dashboard = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        return [f"{path}: not valid JSON: {error}"]
    problems = []
    for key in ("title", "uid", "panels", "templating"):
        if key not in dashboard:
            problems.append(f"{path}: '{key}' is missing")
    variables = {variable.get("name") for variable in (dashboard.get("templating") or {}).get("list", [])}
    for variable in (dashboard.get("templating") or {}).get("list", []):
        if variable.get("datasource") and variable["datasource"].get("uid") != "${datasource}":
            problems.append(f"{path}: variable '{variable.get('name')}' is not on the ${{datasource}} variable")
    if "datasource" not in variables:
        problems.append(f"{path}: no 'datasource' variable: queries must not name one Prometheus by its uid")
    seen = set()
    queries = 0
    for panel in dashboard.get("panels", []):
        title = panel.get("title", "?")
        where = f"{path}: panel '{title}'"
        if panel.get("id") in seen:
            problems.append(f"{where}: id {panel.get('id')} is used twice")
        seen.add(panel.get("id"))
        grid = panel.get("gridPos") or {}
        if not all(isinstance(grid.get(key), int) for key in ("h", "w", "x", "y")):
            problems.append(f"{where}: gridPos needs integer h, w, x and y")
        elif grid["x"] < 0 or grid["x"] + grid["w"] > 24:
            problems.append(f"{where}: gridPos x + w is {grid['x'] + grid['w']}, beyond the 24 columns")
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no queries")
        for target in targets:
            expression = target.get("expr", "")
            queries += 1
            if not expression:
                problems.append(f"{where}: a query without expr")
            sources = [source for source in (panel.get("datasource"), target.get("datasource")) if source]
            if not sources or any((source or {}).get("uid") != "${datasource}" for source in sources):
                problems.append(f"{where}: a query not on the ${{datasource}} variable")
            problems += expression_problems(where, expression)
    if queries == 0:
        problems.append(f"{path}: no queries at all")
    return problems


def custom_schema(document):
    """The schema shipped in deploy/schemas for a custom resource, or None for Kubernetes' own kinds."""
    kind = str(document.get("kind", "")).lower()
    group_version = str(document.get("apiVersion", "")).replace("/", "-")
    path = SCHEMAS / f"{kind}-{group_version}.json"
    return json.loads(path.read_text()) if path.exists() else None


def documents(path):
    """The non-empty YAML documents of a file."""
    with open(path) as file:
        return [document for document in yaml.safe_load_all(file) if document]


def name_of(document):
    kind = document.get("kind", "?")
    name = (document.get("metadata") or {}).get("name", "")
    return f"{kind}/{name}" if name else kind


def rule_problems(document):
    """Problems of the expressions of a PrometheusRule: unknown PushBridge metrics, unbalanced brackets."""
    problems = []
    for group in document["spec"]["groups"]:
        for rule in group["rules"]:
            problems += expression_problems(rule.get("alert"), rule["expr"])
    return problems


def validate(path, document, kubernetes_version):
    """Problems of one document, as strings (empty when it is valid)."""
    if not isinstance(document, dict) or "apiVersion" not in document or "kind" not in document:
        return ["not a Kubernetes resource (apiVersion and kind are required)"]
    schema = custom_schema(document)
    if schema is not None:
        validator = jsonschema.Draft202012Validator(schema)
        problems = [
            f"{'.'.join(str(part) for part in error.absolute_path) or '(top)'}: {error.message}"
            for error in sorted(validator.iter_errors(document), key=lambda error: list(error.absolute_path))
        ]
        if not problems and document["kind"] == "PrometheusRule":
            problems = rule_problems(document)
        return problems
    try:
        kubernetes.validate(document, kubernetes_version, strict=True)
        return []
    except kubernetes.ValidationError as error:
        where = ".".join(str(part) for part in error.absolute_path) or "(top)"
        return [f"{where}: {error.message}"]
    except kubernetes.SchemaNotFoundError:
        return [
            f"no schema for {document['kind']} ({document['apiVersion']}) in Kubernetes {kubernetes_version}: "
            f"add deploy/schemas/{document['kind'].lower()}-{document['apiVersion'].replace('/', '-')}.json"
        ]


def seconds(duration):
    """Seconds of a PushBridge duration string such as 30s, 1m30s or 250ms."""
    parts = re.findall(r"(\d+)(ms|h|m|s)", duration)
    if not parts or "".join(number + unit for number, unit in parts) != duration:
        raise ValueError(f"not a duration: {duration!r}")
    factor = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(int(number) * factor[unit] for number, unit in parts)


def consistency(directory):
    """Problems where the manifests in directory disagree with each other or with pushbridge.yaml."""
    problems = []
    config = yaml.safe_load((directory / "pushbridge.yaml").read_text())
    resources = {}
    for path in sorted(directory.glob("*.yaml")):
        if path.name != "pushbridge.yaml":
            for document in documents(path):
                resources[document.get("kind")] = (path.name, document)

    drain_seconds = seconds((config.get("shutdown") or {}).get("drain_timeout", "30s"))
    admin_port = int(str((config.get("admin") or {}).get("listen", "0.0.0.0:9464")).rsplit(":", 1)[1])
    file, deployment = resources["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace <= drain_seconds + 10:
        problems.append(
            f"{file}: terminationGracePeriodSeconds {grace} must exceed shutdown.drain_timeout "
            f"({drain_seconds:g}s) by more than 10s (producer flush, commit, group leave)")
    container = pod["containers"][0]
    ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
    if ports.get("metrics") != admin_port:
        problems.append(f"{file}: containerPort 'metrics' is {ports.get('metrics')}, admin.listen's port is {admin_port}")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        path = ((container.get(probe) or {}).get("httpGet") or {}).get("path")
        expected = "/readyz" if probe == "readinessProbe" else "/healthz"
        if path != expected:
            problems.append(f"{file}: {probe} must GET {expected}, not {path}")

    file, scaled = resources["ScaledObject"]
    group = (config.get("kafka") or {}).get("group_id", "pushbridge")
    input_topics = {route["input_topic"] for route in config.get("routes", [])}
    trigger_topics = set()
    for trigger in scaled["spec"]["triggers"]:
        metadata = trigger.get("metadata", {})
        if trigger.get("type") != "kafka":
            continue
        if metadata.get("consumerGroup") != group:
            problems.append(f"{file}: trigger {trigger.get('name')} watches group {metadata.get('consumerGroup')}, "
                            f"kafka.group_id is {group}")
        trigger_topics.add(metadata.get("topic"))
    if trigger_topics != input_topics:
        problems.append(f"{file}: kafka triggers watch topics {sorted(map(str, trigger_topics))}, the routes consume "
                        f"{sorted(input_topics)}")
    spec = scaled["spec"]
    if spec.get("minReplicaCount", 0) < 1:
        problems.append(f"{file}: minReplicaCount must be at least 1 (a bridge scaled to zero reports no metrics)")
    if spec.get("maxReplicaCount", 100) < spec.get("minReplicaCount", 0):
        problems.append(f"{file}: maxReplicaCount is below minReplicaCount")

    file, kustomization = resources["Kustomization"]
    listed = set(kustomization.get("resources", []))
    for entry in listed:
        if not (directory / entry).exists():
            problems.append(f"{file}: resource {entry} does not exist")
    for generator in kustomization.get("configMapGenerator", []):
        for entry in generator.get("files", []):
            if not (directory / entry.split("=")[-1]).exists():
                problems.append(f"{file}: configMapGenerator {generator['name']}: file {entry} does not exist")
    for path in sorted(directory.glob("*.yaml")):
        if path.name not in listed | {"kustomization.yaml", "pushbridge.yaml", "secret.example.yaml"}:
            problems.append(f"{file}: {path.name} is not listed under resources")
    return problems


def compose_problems(path):
    """Problems of a docker-compose file that `docker compose config` would find without a daemon: unknown
    services in depends_on, undeclared named volumes, missing bind-mounted files and env files."""
    problems = []
    compose = yaml.safe_load(path.read_text())
    services = compose.get("services") or {}
    volumes = set((compose.get("volumes") or {}).keys())
    if not services:
        return [f"{path}: no services"]
    for name, service in services.items():
        if "image" not in service and "build" not in service:
            problems.append(f"{path}: {name}: neither image nor build")
        for dependency in service.get("depends_on") or {}:
            if dependency not in services:
                problems.append(f"{path}: {name}: depends_on {dependency}, which is not a service")
        for mount in service.get("volumes") or []:
            source = mount.split(":")[0]
            if source.startswith((".", "/")):
                if not (path.parent / source).exists():
                    problems.append(f"{path}: {name}: mounted file {source} does not exist")
            elif source not in volumes:
                problems.append(f"{path}: {name}: volume {source} is not declared under volumes")
        env_files = service.get("env_file") or []
        for env_file in [env_files] if isinstance(env_files, str) else env_files:
            if not (path.parent / env_file).exists():
                problems.append(f"{path}: {name}: env_file {env_file} does not exist")
        build = service.get("build") or {}
        if build and not (path.parent / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).exists():
            problems.append(f"{path}: {name}: the Dockerfile of build does not exist")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", default="1.31.0")
    parser.add_argument("--consistency", type=pathlib.Path, metavar="DIR")
    parser.add_argument("--compose", type=pathlib.Path, metavar="FILE", action="append", default=[])
    parser.add_argument("--dashboard", type=pathlib.Path, metavar="FILE", action="append", default=[])
    parser.add_argument("--metrics-doc", type=pathlib.Path, metavar="FILE",
                        default=REPOSITORY / "docs" / "operations.md")
    parser.add_argument("files", nargs="*")
    arguments = parser.parse_args()

    problems = []
    count = 0
    for path in arguments.files:
        try:
            loaded = documents(path)
        except yaml.YAMLError as error:
            problems.append(f"{path}: not valid YAML: {error}")
            continue
        for document in loaded:
            count += 1
            problems += [f"{path}: {name_of(document)}: {problem}"
                         for problem in validate(path, document, arguments.kubernetes_version)]
    if arguments.consistency:
        problems += consistency(arguments.consistency)
    for path in arguments.compose:
        problems += compose_problems(path)
    for path in arguments.dashboard:
        problems += dashboard_problems(path)
    problems += metrics_problems(arguments.metrics_doc)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) in the deployment manifests", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
