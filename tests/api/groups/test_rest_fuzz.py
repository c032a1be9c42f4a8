"""Property-based fuzzing (schemathesis, in process) of the group and consumer-instance
routes with a real instance to aim at: every generated request must get a documented
non-5xx status, content type and body shape."""

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

from api.rest import create_app
from broker.config import BrokerConfig
from tests.inprocess import ThreadedBroker, create_topic

TOPIC = "fuzz"
GROUP = "fuzz-g"
INSTANCE = "fuzz-i"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    data_dir = tmp_path_factory.mktemp("groups-fuzz")
    # The broker runs on a loop of its own thread (timers and all); schemathesis drives the
    # app from its own loop.
    with ThreadedBroker(BrokerConfig(data_dir=data_dir, max_request_bytes=64 * 1024)) as threaded:
        assert threaded.broker is not None
        threaded.call(create_topic(threaded.broker, TOPIC, 2))
        yield schemathesis.openapi.from_asgi("/openapi.json", threaded.app(create_app))


schema = schemathesis.pytest.from_fixture("api_schema").include(path_regex="^/(consumers|v1/groups)")


@pytest.fixture(scope="module")
def instance(api_schema: Any) -> None:
    """One instance subscribed to the topic, created through the API itself."""
    media = "application/vnd.kafka.v2+json"
    create = api_schema["/consumers/{group}"]["POST"].Case(
        path_parameters={"group": GROUP}, body={"name": INSTANCE}, media_type=media
    )
    assert create.call().status_code in (200, 409)
    subscribe = api_schema["/consumers/{group}/instances/{name}/subscription"]["POST"].Case(
        path_parameters={"group": GROUP, "name": INSTANCE}, body={"topics": [TOPIC]}, media_type=media
    )
    r = subscribe.call()
    assert r.status_code == 204, r.text


def _bound_and_aim(case: Any) -> None:
    """No long polls; instance routes aimed at the real instance (except deletes)."""
    if case.path.endswith("/records"):
        query = case.query if isinstance(case.query, dict) else {}
        timeout = query.get("timeout")
        query["timeout"] = min(timeout, 5) if isinstance(timeout, int) else 0
        case.query = query
    params = case.path_parameters if isinstance(case.path_parameters, dict) else None
    if params and "name" in params and case.method.upper() != "DELETE":
        params["group"], params["name"] = GROUP, INSTANCE


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_group_routes_fuzz(case: Any, instance: None) -> None:
    _bound_and_aim(case)
    case.call_and_validate(checks=CHECKS)
