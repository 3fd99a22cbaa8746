"""schemathesis against the real server's OpenAPI spec: generated requests to every operation
(with and without a valid token, on a board holding a verified entry) never get a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.helpers.lb_server import Server

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "seed"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    server = Server(tmp_path_factory.mktemp("lb") / "data", workers=1).start()
    try:
        token = server.team("schema")
        accepted = server.upload(token, (SEED / "oracle-smoke-v1.tar.gz").read_bytes())
        assert server.wait(accepted.json()["id"])["state"] == "verified"
        yield server, token
    finally:
        server.stop()


@pytest.fixture
def api(board: tuple[Server, str]) -> schemathesis.schemas.BaseSchema:
    return schemathesis.openapi.from_url(f"{board[0].url}/api/openapi.json")


schema = schemathesis.pytest.from_fixture("api")


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case: schemathesis.Case, board: tuple[Server, str]) -> None:
    server, token = board
    for headers in ({}, {"Authorization": f"Bearer {token}"}):
        case.call_and_validate(base_url=server.url, headers=headers, checks=[not_a_server_error])
