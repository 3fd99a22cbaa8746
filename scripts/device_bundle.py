"""``make device-check-bundle``: what the GPU check (``scripts/device_check.sh``) carries to the
offline GPU machine, in ``.device/`` (git-ignored; name it in the device tool's ``carry``).

* ``.device/wheels/``: the project's dependencies that the machine's image (Python 3.12, torch,
  transformers 5.17, accelerate, safetensors, tokenizers, numpy, pyyaml) lacks or holds in
  another version, for CPython 3.12 on manylinux x86-64, without their dependencies: the
  transformers and peft the project pins (5.17 names the KV-cache argument of a forward
  ``past_key_values``; the project's decoding passes ``cache``), llguidance (constrained
  decoding), hydra-core, omegaconf and antlr4 (the trainer's settings import them), gymnasium
  and pettingzoo (the environment modules the trainer imports). antlr4-python3-runtime 4.9.3
  is published as source only: it is built here into a pure-Python wheel.
* ``.device/smollm2/``: SmolLM2-135M-Instruct's config and tokenizer (from the converted
  embedded model in the asset cache); the check draws the weights at random.

What travels is the working tree (tracked and untracked files that git does not ignore, and
``shared/`` where there is one) plus ``.device``: 64 MiB at most. The builder prints each share
and fails, naming the shares, when the total is over.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 64 * 2**20  # bytes the device tool carries
# The project's pins (pyproject.toml), downloaded as built wheels.
WHEELS = (
    "transformers==5.24.0",
    "peft==0.21.2",
    "llguidance==1.9.1",
    "hydra-core==1.3.2",
    "omegaconf==2.3.0",
    "gymnasium==1.2.2",
    "farama-notifications==0.0.4",
    "pettingzoo==1.25.0",
)
BUILT = ("antlr4-python3-runtime==4.9.3",)  # source only on the registry: built here
PLATFORMS = ("manylinux_2_31", "manylinux_2_28", "manylinux_2_17", "manylinux2014", "manylinux1")
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)


class BundleTooLarge(ValueError):
    """What would travel is over the device tool's limit."""


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of the working tree that travels: tracked and untracked-not-ignored files (as
    ``git ls-files`` lists them; deleted ones skipped), and ``shared/`` if present."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    total = 0
    for name in {n for n in listed if n}:
        path = repo / name.decode()
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    shared = repo / "shared"
    return total + (dir_bytes(shared) if shared.is_dir() else 0)


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def check_total(shares: dict[str, int], limit: int = LIMIT) -> int:
    """The total of ``shares`` (bytes by name); BundleTooLarge when it is over ``limit``."""
    total = sum(shares.values())
    if total > limit:
        listed = ", ".join(f"{name} {mib(n)}" for name, n in shares.items())
        raise BundleTooLarge(
            f"what travels to the GPU machine is {mib(total)}, over the {mib(limit)} limit "
            f"({listed}): carry fewer wheels or shrink the working tree"
        )
    return total


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    subprocess.run(cmd, check=True)


def fetch_wheels(out: Path) -> None:
    """The wheels into ``out`` (replaced whole, so no second version of a package stays)."""
    with tempfile.TemporaryDirectory(prefix="device-wheels-") as tmp:
        platforms = [a for p in PLATFORMS for a in ("--platform", f"{p}_x86_64")]
        _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platforms,
            "-d",
            tmp,
            *WHEELS,
        )
        _pip("wheel", "--no-deps", "--no-build-isolation", "-w", tmp, *BUILT)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for wheel in Path(tmp).glob("*.whl"):
            shutil.copy2(wheel, out / wheel.name)


def copy_model_files(out: Path) -> None:
    """SmolLM2's config and tokenizer into ``out`` (its weights stay behind)."""
    sys.path.insert(0, str(REPO))
    from benchmark.llm.smollm2 import smollm2_dir

    source = smollm2_dir()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in MODEL_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)
    if not (out / "config.json").is_file() or not (out / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{source} lacks SmolLM2's config.json or tokenizer.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build .device/ for the GPU check.")
    parser.add_argument("--out", type=Path, default=REPO / ".device")
    parser.add_argument("--limit-mib", type=float, default=LIMIT / 2**20)
    args = parser.parse_args(argv)
    fetch_wheels(args.out / "wheels")
    copy_model_files(args.out / "smollm2")
    shares = {
        "working tree": tree_bytes(),
        "wheels": dir_bytes(args.out / "wheels"),
        "smollm2 config and tokenizer": dir_bytes(args.out / "smollm2"),
    }
    for wheel in sorted((args.out / "wheels").glob("*.whl")):
        print(f"  {wheel.name:<60} {mib(wheel.stat().st_size):>10}")
    for name, n in shares.items():
        print(f"{name:<32} {mib(n):>10}")
    try:
        total = check_total(shares, int(args.limit_mib * 2**20))
    except BundleTooLarge as err:
        print(f"device-check-bundle: {err}", file=sys.stderr)
        return 1
    print(f"{'total (carry .device)':<32} {mib(total):>10} of {mib(int(args.limit_mib * 2**20))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
