"""Submit a run to a leaderboard server: pack it if needed, upload, wait for the verdict.

    python -m leaderboard.client.submit RUN_DIR --server http://127.0.0.1:8080 \
        --token-file team.token

``RUN_DIR`` is a run directory of ``benchmark.run`` (packed on the fly, see
:mod:`leaderboard.client.pack`) or a bundle already packed (``.tar.gz``). The upload shows a
progress bar; the client then polls the submission until it is verified or rejected and prints the
rank or the server's reasons. It exits 0 only when the submission is verified (a reproduction of an
entry already on the board counts). Network errors and refusals are one clear line each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

from benchmark.results.run_dir import read_run
from leaderboard.client.pack import SUBMISSION_OPTIONS, add_submission_options, describe, pack_run
from leaderboard.core.tracks import Track

CHUNK = 64 * 1024
FINAL = ("verified", "rejected")


class SubmitError(RuntimeError):
    """Why a submission could not be made or followed (one line, for the user)."""


def _read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as err:
        raise SubmitError(f"cannot read the token file {path}: {err.strerror}") from err
    if not token or any(c.isspace() for c in token):
        raise SubmitError(f"{path} does not hold a token (one line, no spaces)")
    return token


def _bundle(source: Path, workdir: Path, fields: dict[str, Any], track: str | None) -> Path:
    """The bundle to upload: ``source`` itself, or ``source`` (a run directory) packed."""
    if source.is_file():
        return source
    if not source.is_dir():
        raise SubmitError(f"{source} is neither a run directory nor a bundle file")
    try:
        submission = describe(read_run(source), **fields)
        chosen = Track.from_key(track) if track else None
        return pack_run(source, workdir / "submission.tar.gz", submission, chosen)
    except ValueError as err:
        raise SubmitError(f"cannot pack {source}: {err}") from err


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        field = f" (field {body['field']})" if body.get("field") else ""
        return f"{body.get('detail', body)}{field}"
    return str(body)


def _chunks(path: Path, progress: Progress, bar: Any) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            progress.advance(bar, len(chunk))
            yield chunk


def upload(client: httpx.Client, bundle: Path, token: str, console: Console) -> dict[str, Any]:
    """POST the bundle as the multipart field ``file``; the server's answer: 202 for a new
    submission, 200 when the team had uploaded this bundle before (its earlier submission)."""
    size = bundle.stat().st_size
    columns = (TextColumn("uploading"), BarColumn(), DownloadColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("upload", total=size)
        boundary = "collab-bench-submission"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{bundle.name}"\r\nContent-Type: application/gzip\r\n\r\n'
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()

        def body() -> Iterator[bytes]:
            yield head
            yield from _chunks(bundle, progress, bar)
            yield tail

        response = client.post(
            "/api/submissions",
            content=body(),
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(len(head) + size + len(tail)),
            },
        )
    if response.status_code == 200:
        console.print(
            f"this bundle was uploaded before as submission {response.json()['id']}; "
            "nothing new was stored"
        )
    elif response.status_code != 202:
        raise SubmitError(
            f"the server refused the submission ({response.status_code}): {_detail(response)}"
        )
    return response.json()


def wait(client: httpx.Client, submission: str, timeout: float, interval: float) -> dict:
    """Poll the submission until it is verified or rejected (or ``timeout`` seconds pass)."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/api/submissions/{submission}")
        if response.status_code != 200:
            raise SubmitError(
                f"cannot read submission {submission} ({response.status_code}): {_detail(response)}"
            )
        state = response.json()
        if state["state"] in FINAL:
            return state
        if time.monotonic() > deadline:
            raise SubmitError(
                f"submission {submission} is still {state['state']} after {timeout:g} s; "
                "its page will show the verdict"
            )
        time.sleep(interval)


def report(state: dict[str, Any], console: Console) -> int:
    """Print the verdict; the exit status (0 only when verified)."""
    if state["state"] == "verified":
        if state.get("reproduces") is not None:
            console.print(
                f"verified: a reproduction of entry {state['reproduces']} on track "
                f"{state['track']} (same traces)"
            )
        else:
            console.print(
                f"verified: entry {state['entry']} on track {state['track']}, rank {state['rank']}"
            )
        return 0
    console.print(f"rejected: {state.get('reason') or 'see the episodes below'}")
    for episode in state.get("episodes", []):
        if not episode.get("ok"):
            for reason in episode.get("reasons") or []:
                console.print(f"  {episode['key']}: {reason}", markup=False)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leaderboard.client.submit", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("source", metavar="RUN_DIR", help="a run directory or a packed bundle")
    parser.add_argument("--server", required=True, help="the leaderboard's URL")
    parser.add_argument("--token-file", required=True, type=Path, help="the team's token file")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds to wait (default 1800)"
    )
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    add_submission_options(parser)
    args = parser.parse_args(argv)
    console = Console(stderr=False, highlight=False)
    try:
        token = _read_token(args.token_file)
        fields = {k: getattr(args, k) for k in SUBMISSION_OPTIONS}
        with tempfile.TemporaryDirectory(prefix="lb-submit-") as tmp:
            bundle = _bundle(Path(args.source), Path(tmp), fields, args.track)
            with httpx.Client(base_url=args.server, timeout=60) as client:
                accepted = upload(client, bundle, token, console)
                console.print(
                    f"submitted {accepted['id']} to track {accepted['track']}; verifying ..."
                )
                state = wait(client, accepted["id"], args.timeout, args.interval)
    except SubmitError as err:
        print(f"submit: error: {err}", file=sys.stderr)
        return 2
    except httpx.HTTPError as err:
        print(f"submit: error: cannot reach {args.server}: {err}", file=sys.stderr)
        return 2
    return report(state, console)


if __name__ == "__main__":
    raise SystemExit(main())
