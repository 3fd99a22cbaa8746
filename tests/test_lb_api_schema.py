"""schemathesis against the real server's OpenAPI spec: requests generated for every operation
(valid and invalid ones, with and without a team token, on a board holding a verified entry)
never get a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.helpers.lb_server import Server

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
EXAMPLES = 30  # per operation and generation mode


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


def test_no_generated_request_gets_a_server_error(board: tuple[Server, str]) -> None:
    server, token = board
    api = schemathesis.openapi.from_url(f"{server.url}/api/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    labels = {op.label for op in operations}
    assert {"POST /api/submissions", "GET /api/submissions/{submission_id}"} <= labels
    assert {"POST /api/challenges", "GET /api/tracks", "GET /api/export"} <= labels
    failures: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def probe(case: schemathesis.Case) -> None:
                for headers in ({}, {"Authorization": f"Bearer {token}"}):
                    response = case.call(base_url=server.url, headers=headers, timeout=60)
                    if response.status_code >= 500:
                        failures.append(
                            f"{case.method} {case.formatted_path}: {response.status_code}"
                        )

            try:
                probe()
            except Unsatisfiable:
                # An operation without parameters or body has no invalid request to make.
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert not failures, failures[:10]
    assert "Traceback" not in server.logs()
