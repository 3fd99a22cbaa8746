"""The hf backend hands the memory a decode freed back to the OS (glibc ``malloc_trim``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmark.llm.memory import release_free_memory

# Freed tensors stay in glibc's heap: a large free raises the mmap threshold, then many
# mid-sized tensors land in the heap, and one kept at its top pins all the freed ones below.
FRAGMENT = """
import json, torch
from pathlib import Path
from benchmark.llm.memory import release_free_memory

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

big = torch.ones(4 << 20); del big  # 16 MiB
chunks = [torch.ones(1 << 18) for _ in range(400)]  # 400 MiB in 1 MiB tensors
kept = chunks[-1]
del chunks
held = rss()
ran = release_free_memory()
print(json.dumps({"held": held, "after": rss(), "ran": ran}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc: Linux")
def test_freed_memory_goes_back_to_the_os() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENT], capture_output=True, text=True, check=True
    ).stdout
    import json

    got = json.loads(out.strip().splitlines()[-1])
    assert got["ran"] is True
    # The freed 399 MiB were resident before, and are not after.
    assert got["held"] - got["after"] > 300, got


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc: Linux")
def test_it_runs_on_glibc_every_time_it_is_called() -> None:
    # The backend calls it after every decode: it must keep working, not just the first time.
    assert [release_free_memory() for _ in range(3)] == [True, True, True]


def test_the_hf_backend_releases_after_each_decode(
    tiny_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmark.llm.hf as hf
    from benchmark.llm import Sampling

    calls = []
    monkeypatch.setattr(hf, "release_free_memory", lambda: calls.append(1) or True)
    llm = hf.HFBackend(tiny_model)
    chats = [[{"role": "user", "content": f"name a fruit ({k})"}] for k in range(3)]
    llm.generate(chats, Sampling(max_tokens=3))
    assert calls == [1]  # one batched decode, one release
    llm.generate(chats[:1], Sampling(max_tokens=3))
    assert calls == [1, 1]
