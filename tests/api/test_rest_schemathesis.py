"""Property-based fuzzing of the REST API from its own OpenAPI spec (schemathesis 4, in process).

Every generated request, valid or not, must get a documented non-5xx status, a documented
content type and a body matching the documented schema. Each case is sent twice: as
generated (mostly unknown topics: the error paths) and with the topic / cluster /
partition / offset pointed at a real topic (the produce, fetch and admin paths); fetches
are also repeated asking for the json embedded format.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.rest import V2_JSON, create_app
from broker.config import BrokerConfig
from tests.inprocess import ThreadedBroker, create_topic

TOPIC = "fuzz"
PARTITIONS = 3
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    data_dir = tmp_path_factory.mktemp("rest-fuzz")
    # The broker runs on a loop of its own thread (controller, replicas, group timers);
    # schemathesis drives the app from its own loop.
    with ThreadedBroker(BrokerConfig(data_dir=data_dir, max_request_bytes=256 * 1024)) as threaded:
        assert threaded.broker is not None
        threaded.call(create_topic(threaded.broker, TOPIC, PARTITIONS))
        yield schemathesis.openapi.from_asgi("/openapi.json", threaded.app(create_app))


schema = schemathesis.pytest.from_fixture("api_schema")


def _bound(case: Any) -> None:
    """Keep generated cases cheap: no long polls, no topics with thousands of partitions."""
    query = case.query if isinstance(case.query, dict) else None
    if query is not None and isinstance(query.get("timeout"), int):
        query["timeout"] = min(query["timeout"], 5)
    if query is not None and isinstance(query.get("timeout_ms"), int):  # POST /v1/tier/sync
        query["timeout_ms"] = min(query["timeout_ms"], 2000)
    if query is not None and "offset" in query and "timeout" not in query:
        query["timeout"] = 0
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("partitions_count"), int):
        body["partitions_count"] = min(body["partitions_count"], 4)


def _point_at_real_topic(case: Any) -> bool:
    params = case.path_parameters if isinstance(case.path_parameters, dict) else None
    if not params or case.method.upper() == "DELETE":
        return False
    changed = False
    if "cluster_id" in params:
        params["cluster_id"] = "strata-local"
        changed = True
    if "topic" in params:
        params["topic"] = TOPIC
        changed = True
        if isinstance(params.get("partition"), int):
            params["partition"] %= PARTITIONS
    query = case.query if isinstance(case.query, dict) else None
    if query is not None and isinstance(query.get("offset"), int):
        query["offset"] %= 8
    return changed


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors_and_spec_conformance(case: Any) -> None:
    _bound(case)
    case.call_and_validate(checks=CHECKS)
    if _point_at_real_topic(case):
        case.call_and_validate(checks=CHECKS)
        if case.path.endswith("/records"):
            case.call_and_validate(checks=CHECKS, headers={"Accept": V2_JSON})
