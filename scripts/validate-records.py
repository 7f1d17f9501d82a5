#!/usr/bin/env python3
"""Validates PushBridge records against the JSON Schemas in schemas/.

Reads lines "<schema-file-name><TAB><json>" on standard input, prints one line per invalid record
and exits 1 if any record is invalid, 0 otherwise. Used by the test suite; usable by data teams too.
"""
import json
import pathlib
import sys

import jsonschema
from referencing import Registry, Resource

root = pathlib.Path(__file__).resolve().parent.parent / "schemas"
resources = {}
for path in root.glob("*.json"):
    schema = json.loads(path.read_text())
    resources[path.name] = Resource.from_contents(schema)
registry = Registry().with_resources(
    [(name, resource) for name, resource in resources.items()]
    + [(resource.contents["$id"], resource) for resource in resources.values()]
)
validators = {
    name: jsonschema.Draft202012Validator(
        resource.contents, registry=registry, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for name, resource in resources.items()
}

failures = 0
count = 0
for number, line in enumerate(sys.stdin, start=1):
    line = line.rstrip("\n")
    if not line:
        continue
    name, _, text = line.partition("\t")
    count += 1
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        print(f"line {number}: not JSON: {error}")
        failures += 1
        continue
    if name not in validators:
        print(f"line {number}: unknown schema file {name}")
        failures += 1
        continue
    for error in validators[name].iter_errors(record):
        print(f"line {number}: {name}: {error.json_path}: {error.message}")
        failures += 1
print(f"validated {count} records, {failures} problems", file=sys.stderr)
sys.exit(1 if failures else 0)
