"""Submission bundles: packing a real run, and reading uploads safely as streams.

The bundle is packed once from a real run of the smoke suite; every bad upload is derived
from its bytes (or, for archive-level attacks, is a real small archive built for the case)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from benchmark.results.run_dir import read_run
from leaderboard.client.pack import main, pack_run
from leaderboard.core.bundle import BundleError, Limits, read_bundle
from leaderboard.core.tracks import Track, tracks_of_run
from tests.helpers.lb_bundles import archive, members, rows_of, run_suite, with_rows

TRANSPORT_ONLY = (
    "suite.entries=[{task:transport_produce_fridge_v0,split:test,n_agents:[2],seeds:[0]}]"
)


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oracle on the smoke suite: 6 run episodes and their 6 one-agent references."""
    out = tmp_path_factory.mktemp("lb") / "run"
    run_suite(out, "suite=smoke", "baseline=oracle")
    return out


@pytest.fixture(scope="module")
def packed(oracle_run: Path) -> bytes:
    out = pack_run(oracle_run, oracle_run.parent / "sub.tar.gz", {"method": "Oracle"})
    return out.read_bytes()


def _read(data: bytes, **limits: Any):
    return read_bundle(io.BytesIO(data), Limits(**limits))


def _refused(data: bytes, status: int, field: str, message: str, **limits: Any) -> BundleError:
    with pytest.raises(BundleError) as info:
        _read(data, **limits)
    err = info.value
    assert (err.status, err.field) == (status, field), str(err)
    assert message in str(err)
    return err


def _raw_tar(*entries: tarfile.TarInfo, data: bytes = b"") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for info in entries:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return raw.getvalue()


def test_a_packed_run_reads_back_whole(oracle_run: Path, packed: bytes) -> None:
    bundle = _read(packed)
    run = read_run(oracle_run)
    assert bundle.track == Track("smoke", "v1", 2, True, "full", "skill")
    assert bundle.sha256 == hashlib.sha256(packed).hexdigest()
    assert sorted(json.dumps(r, sort_keys=True) for r in bundle.rows) == sorted(
        json.dumps(r, sort_keys=True) for r in run.rows
    )
    assert {k: t["trace_hash"] for k, t in bundle.traces.items()} == {
        r["key"]: r["trace_hash"] for r in run.rows
    }
    assert bundle.manifest["baseline"] == "oracle" and bundle.manifest["challenge"] is None
    assert bundle.manifest["config_hash"] == run.manifest["config_hash"]
    submission = bundle.submission
    assert submission["method"] == "Oracle" and submission["llm_tokens"] == 0
    assert submission["wall_time_s"] == pytest.approx(sum(r["wall_s"] for r in run.rows), abs=1e-3)


def test_packing_is_deterministic(oracle_run: Path, packed: bytes, tmp_path: Path) -> None:
    again = pack_run(oracle_run, tmp_path / "again.tar.gz", {"method": "Oracle"})
    assert again.read_bytes() == packed


def test_the_cli_packs_with_the_baseline_as_method(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "cli.tar.gz"
    code = main([str(oracle_run), "-o", str(out), "--code-url", "https://example.org/code"])
    assert code == 0 and "wrote" in capsys.readouterr().out
    bundle = _read(out.read_bytes())
    assert bundle.submission["method"] == "oracle"
    assert bundle.submission["code_url"] == "https://example.org/code"
    assert main([str(oracle_run), "-o", str(out), "--paper-url", "javascript:alert(1)"]) == 2
    assert "submission.yaml.paper_url: expected an http(s) URL" in capsys.readouterr().err


def test_a_run_of_several_tracks_needs_one_chosen_and_each_complete(tmp_path: Path) -> None:
    run = run_suite(
        tmp_path / "run", "suite=smoke", TRANSPORT_ONLY, "comm=[true,false]", "reference=false"
    )["root"]
    assert {t.key for t in tracks_of_run(read_run(run))} == {
        "smoke-v1.n2.comm-on.full.skill",
        "smoke-v1.n2.comm-off.full.skill",
    }
    with pytest.raises(ValueError, match=r"several tracks .* choose one \(--track KEY\)"):
        pack_run(run, tmp_path / "x.tar.gz", {"method": "m"})
    with pytest.raises(
        ValueError, match="oracle/rearrange_kitchen_v0/test/n2/s0/comm0/run: missing"
    ):
        pack_run(
            run,
            tmp_path / "x.tar.gz",
            {"method": "m"},
            Track.from_key("smoke-v1.n2.comm-off.full.skill"),
        )
    assert not (tmp_path / "x.tar.gz").exists()


def test_a_run_under_other_env_options_is_not_packed(tmp_path: Path) -> None:
    run = run_suite(tmp_path / "run", "suite=smoke", "+env.token_cap=16")["root"]
    with pytest.raises(
        ValueError,
        match=r"run with \{'token_cap': 16\}; the board's tracks use \{'token_cap': 32\}",
    ):
        pack_run(run, tmp_path / "x.tar.gz", {"method": "m"})


def test_a_run_with_a_failed_episode_is_not_packed(tmp_path: Path) -> None:
    run = run_suite(
        tmp_path / "run", "suite=smoke", "baseline.name=tests.helpers.teams:CrashingTeamForTests"
    )["root"]
    failed = [r["key"] for r in read_run(run).rows if r["status"] == "error"]
    assert failed, "the crashing team fails its transport episodes"
    with pytest.raises(ValueError, match=f"{failed[0]}: status 'error'"):
        pack_run(run, tmp_path / "x.tar.gz", {"method": "m"})


def test_an_oversized_upload_is_refused_with_413(packed: bytes) -> None:
    _refused(
        packed, 413, "archive", f"larger than {len(packed) - 1} bytes", max_bytes=len(packed) - 1
    )
    assert _read(packed, max_bytes=len(packed)).sha256 == hashlib.sha256(packed).hexdigest()


def _zeros_gz(name: str, size: int) -> bytes:
    """A real .tar.gz whose one member is ``size`` zero bytes (it compresses ~1000 times)."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        info = tarfile.TarInfo(name)
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return raw.getvalue()


def test_a_gzip_bomb_is_refused_by_its_compression_ratio() -> None:
    bomb = _zeros_gz("episodes.jsonl", 8 << 20)
    assert len(bomb) < 64 << 10
    _refused(bomb, 413, "archive", "times its size (limit 200)")


def test_a_member_larger_than_the_limit_is_refused_before_it_is_decompressed() -> None:
    bomb = _zeros_gz("traces/x.json", 40 << 20)
    _refused(bomb, 413, "member 'traces/x.json'", f"larger than {Limits().max_member_bytes} bytes")


def test_a_tar_header_bomb_is_refused_while_decompressing() -> None:
    # A pax header that tarfile would read whole into memory: the decoder stops at the limit.
    info = tarfile.TarInfo("manifest.json")
    info.pax_headers = {"comment": "0" * (6 << 20)}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(b""))
    _refused(
        raw.getvalue(),
        413,
        "archive",
        f"decompresses to more than {4 << 20} bytes",
        max_unpacked_bytes=4 << 20,
        max_ratio=1e9,
    )


def test_a_zip_bomb_is_not_a_gzipped_tar() -> None:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", bytes(16 << 20))
    _refused(raw.getvalue(), 400, "archive", "not a gzip'd tar archive")


def test_too_many_members_are_refused(packed: bytes) -> None:
    _refused(packed, 413, "archive", "more than 5 members", max_members=5)


@pytest.mark.parametrize(
    ("name", "field", "message"),
    [
        ("../manifest.json", "member '../manifest.json'", "'..' in the path"),
        ("traces/../../etc.json", "member 'traces/../../etc.json'", "'..' in the path"),
        ("/etc/passwd", "member '/etc/passwd'", "absolute path"),
        ("notes.txt", "member 'notes.txt'", "unexpected name"),
        ("traces/sub/x.json", "member 'traces/sub/x.json'", "unexpected name"),
    ],
)
def test_members_with_unsafe_or_unexpected_names_are_refused(
    name: str, field: str, message: str
) -> None:
    info = tarfile.TarInfo(name)
    info.size = 2
    _refused(_raw_tar(info, data=b"{}"), 400, field, message)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (tarfile.SYMTYPE, "a symbolic link (to '/etc/passwd')"),
        (tarfile.LNKTYPE, "a hard link (to '/etc/passwd')"),
        (tarfile.CHRTYPE, "a device or special file"),
        (tarfile.FIFOTYPE, "a device or special file"),
        (tarfile.DIRTYPE, "unexpected directory"),
    ],
)
def test_links_devices_and_directories_are_refused(kind: bytes, message: str) -> None:
    info = tarfile.TarInfo("manifest.json")
    info.type = kind
    info.linkname = "/etc/passwd"
    _refused(_raw_tar(info), 400, "member 'manifest.json'", message)


def test_a_member_twice_is_refused(packed: bytes) -> None:
    contents = members(packed)
    data = archive(contents)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, blob in [*contents.items(), ("episodes.jsonl", contents["episodes.jsonl"])]:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    assert _read(data).rows
    _refused(raw.getvalue(), 400, "member 'episodes.jsonl'", "appears twice")


def test_bytes_after_the_gzip_stream_are_refused(packed: bytes) -> None:
    _refused(packed + b"extra", 400, "archive", "bytes after the end of the gzip stream")
    _refused(packed[:-20], 400, "archive", "truncated")


def test_a_corrupted_gzip_stream_is_refused(packed: bytes) -> None:
    body = zlib.decompress(packed, wbits=31)
    broken = bytearray(gzip.compress(body, mtime=0))
    broken[-8] ^= 0xFF  # the CRC of the data
    _refused(bytes(broken), 400, "archive", "not a gzip'd tar archive")


def test_a_member_whose_checksum_differs_from_the_manifest_is_refused(packed: bytes) -> None:
    contents = members(packed)
    name = next(n for n in contents if n.startswith("traces/"))
    trace = json.loads(contents[name])
    trace["final"]["success"] = not trace["final"]["success"]
    contents[name] = json.dumps(trace).encode()
    _refused(
        archive(contents, rehash=False),
        422,
        f"manifest.members.{name}",
        "does not match the member's content",
    )


def test_a_member_missing_from_the_manifest_list_is_refused(packed: bytes) -> None:
    contents = members(packed)
    manifest = json.loads(contents["manifest.json"])
    name = next(n for n in manifest["members"] if n.startswith("traces/"))
    del manifest["members"][name]
    contents["manifest.json"] = json.dumps(manifest).encode()
    _refused(
        archive(contents, rehash=False),
        422,
        "manifest.members",
        f"{name} is in the archive but not listed",
    )


def test_malformed_json_is_refused_naming_the_line(packed: bytes) -> None:
    contents = members(packed)
    lines = contents["episodes.jsonl"].decode().splitlines()
    lines[1] = lines[1][:40]
    contents["episodes.jsonl"] = ("\n".join(lines) + "\n").encode()
    _refused(archive(contents), 422, "episodes.jsonl line 2", "not valid JSON")
    contents = members(packed)
    contents["manifest.json"] = b'{"format": 1,'
    _refused(archive(contents, rehash=False), 422, "manifest.json", "not valid JSON")


def test_nan_is_not_a_json_number(packed: bytes) -> None:
    contents = members(packed)
    lines = contents["episodes.jsonl"].decode().splitlines()
    lines[0] = lines[0].replace('"TR": 1.0', '"TR": NaN')
    contents["episodes.jsonl"] = ("\n".join(lines) + "\n").encode()
    _refused(archive(contents), 422, "episodes.jsonl line 1", "NaN is not a JSON number")


def test_a_missing_row_field_is_refused_with_its_path(packed: bytes) -> None:
    contents = members(packed)
    rows = rows_of(contents)
    del rows[2]["SR"]
    _refused(
        archive(with_rows(contents, rows)), 422, "episodes.jsonl line 3: field 'SR'", "missing"
    )
    rows = rows_of(contents)
    rows[0]["seed"] = "0"
    _refused(
        archive(with_rows(contents, rows)),
        422,
        "episodes.jsonl line 1: field 'seed'",
        "expected integer",
    )


def test_a_missing_manifest_field_is_refused_with_its_path(packed: bytes) -> None:
    contents = members(packed)
    manifest = json.loads(contents["manifest.json"])
    del manifest["track"]["n_agents"]
    contents["manifest.json"] = json.dumps(manifest).encode()
    _refused(archive(contents, rehash=False), 422, "manifest.track.n_agents", "missing")
    manifest["track"]["n_agents"] = 2
    manifest["track"]["observability"] = "omniscient"
    contents["manifest.json"] = json.dumps(manifest).encode()
    _refused(
        archive(contents, rehash=False),
        422,
        "manifest.track",
        "observability='omniscient' is not one of",
    )


def test_a_missing_trace_field_is_refused_with_its_path(packed: bytes) -> None:
    contents = members(packed)
    name = next(n for n in contents if n.startswith("traces/"))
    trace = json.loads(contents[name])
    del trace["config"]["seed"]
    contents[name] = json.dumps(trace).encode()
    _refused(archive(contents), 422, f"{name}: field 'config.seed'", "missing")


def test_rows_and_traces_must_pair_up(packed: bytes) -> None:
    contents = members(packed)
    name = next(n for n in contents if n.startswith("traces/"))
    orphan = dict(contents)
    orphan[name.replace(".json", "_extra.json")] = contents[name]
    _refused(
        archive(orphan),
        422,
        name.replace(".json", "_extra.json"),
        "no row of episodes.jsonl has this trace",
    )
    missing = {n: b for n, b in contents.items() if n != name}
    _refused(
        archive(missing), 422, "episodes.jsonl line 1", f"its trace {name} is not in the archive"
    )


@pytest.mark.parametrize(
    ("yaml_text", "field", "message"),
    [
        ("method: [unclosed", "submission.yaml", "not valid YAML"),
        (
            "description: no method\nllm_tokens: 0\nwall_time_s: 1.0\n",
            "submission.yaml.method",
            "missing",
        ),
        (
            "method: m\nllm_tokens: -1\nwall_time_s: 1.0\n",
            "submission.yaml.llm_tokens",
            "expected an integer from 0 to 1e+15",
        ),
        (
            "method: m\nllm_tokens: 0\nwall_time_s: 1.0\nscore: 1\n",
            "submission.yaml",
            "unknown field(s) ['score']",
        ),
        (
            'method: "a\\nb"\nllm_tokens: 0\nwall_time_s: 1.0\n',
            "submission.yaml.method",
            "one line",
        ),
        (
            "method: m\nllm_tokens: 0\nwall_time_s: 1.0\ncode_url: ftp://x\n",
            "submission.yaml.code_url",
            "http(s) URL",
        ),
    ],
)
def test_a_malformed_submission_yaml_is_refused_naming_the_field(
    packed: bytes, yaml_text: str, field: str, message: str
) -> None:
    contents = members(packed)
    contents["submission.yaml"] = yaml_text.encode()
    _refused(archive(contents), 422, field, message)


def test_a_status_other_than_ok_is_refused(packed: bytes) -> None:
    contents = members(packed)
    rows = rows_of(contents)
    rows[4]["status"] = "error"
    _refused(
        archive(with_rows(contents, rows)),
        422,
        "episodes.jsonl line 5: field 'status'",
        "only finished episodes",
    )


def test_a_run_directory_is_required(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no manifest\.json; not a run directory"):
        pack_run(tmp_path, tmp_path / "x.tar.gz", {"method": "m"})
    assert not (tmp_path / "traces").exists()


def test_a_torn_row_line_leaves_its_episode_missing(oracle_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(oracle_run, copy)
    lines = (copy / "episodes.jsonl").read_text().splitlines()
    torn = json.loads(lines[0])["key"]
    (copy / "episodes.jsonl").write_text("\n".join([lines[0][:30], *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=f"{torn}: missing"):
        pack_run(copy, tmp_path / "x.tar.gz", {"method": "m"})
