"""Parses Prometheus text exposition from stdin with prometheus_client's own parser (from
PyPI) and prints every sample as JSON: [{"name", "labels", "value"}]. Exits non-zero when the
text does not parse."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for sample in family.samples:
        samples.append({"name": sample.name, "labels": sample.labels, "value": sample.value})
print(json.dumps(samples))
