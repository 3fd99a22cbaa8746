"""LoRA adapters (peft) on a local model: saved with the fingerprint of the base weights they
were trained on, checked against it when loaded, then merged into the model.

An adapter directory holds peft's ``adapter_config.json`` and ``adapter_model.safetensors`` and
our ``base_model.json``: the base model's name and a fingerprint of its weights (a sha256 over
its shape settings and a slice of its token embeddings). Loading an adapter on another model
fails with a :class:`ValueError` naming both, before any weight is touched; an adapter without
``base_model.json`` (one trained elsewhere) is checked by peft's shapes only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

BASE_FILE = "base_model.json"


def fingerprint(model: Any) -> str:
    """A short sha256 of ``model``'s shape settings and the first rows of its token embeddings
    (under a peft wrapper: of the base model)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = base.config
    digest = hashlib.sha256()
    for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size"):
        digest.update(f"{key}={getattr(config, key, None)};".encode())
    embed = base.get_input_embeddings().weight.detach()[:64].to(torch.float32).cpu()
    digest.update(embed.numpy().tobytes())
    return digest.hexdigest()[:16]


def check_adapter_dir(path: str | Path) -> Path:
    """``path`` when it is a peft adapter directory; else a ValueError naming it."""
    path = Path(path).expanduser()
    if not (path / "adapter_config.json").is_file():
        raise ValueError(f"adapter {str(path)!r} is not a peft adapter directory")
    return path


def save_adapter(peft_model: Any, out: str | Path, base_name: str) -> Path:
    """Save the adapters of ``peft_model`` (only them) to ``out`` with the base's fingerprint."""
    out = Path(out)
    peft_model.save_pretrained(out)
    (out / "README.md").unlink(missing_ok=True)  # peft's empty model card
    config_file = out / "adapter_config.json"
    config = json.loads(config_file.read_text())
    config["base_model_name_or_path"] = base_name  # not this machine's path
    config_file.write_text(json.dumps(config, indent=2) + "\n")
    record = {"name": base_name, "fingerprint": fingerprint(peft_model)}
    (out / BASE_FILE).write_text(json.dumps(record, indent=1) + "\n")
    return out


def check_base(model: Any, adapter: str | Path, model_name: str) -> Path:
    """The adapter directory ``adapter``; a ValueError when it was trained on another base
    model than ``model`` (named ``model_name`` in the error)."""
    path = check_adapter_dir(adapter)
    record_file = path / BASE_FILE
    if record_file.is_file():
        record = json.loads(record_file.read_text())
        if record.get("fingerprint") != fingerprint(model):
            raise ValueError(
                f"adapter {str(path)!r} was trained on {record.get('name')!r} "
                f"(fingerprint {record.get('fingerprint')}), not on this model {model_name!r} "
                f"(fingerprint {fingerprint(model)})"
            )
    return path


def load_trainable(peft_model: Any, adapter: str | Path, model_name: str) -> None:
    """Load the adapter directory ``adapter`` into the (same-shaped) LoRA adapters of
    ``peft_model``, which stay trainable; a ValueError when it does not fit."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = check_base(peft_model, adapter, model_name)
    weights = load_file(str(path / "adapter_model.safetensors"))
    result = set_peft_model_state_dict(peft_model, weights)
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise ValueError(f"adapter {str(path)!r} does not fit {model_name!r}: {unexpected[:3]}")


def attach_adapter(model: Any, adapter: str | Path, model_name: str) -> Any:
    """``model`` with the adapter directory ``adapter`` beside its layers, not merged (a base
    put in another format, 4-bit, keeps the adapter's weights exact); a ValueError when the
    adapter was trained on another base model."""
    path = check_base(model, adapter, model_name)
    from peft import PeftModel

    try:
        return PeftModel.from_pretrained(model, path).eval()
    except (RuntimeError, ValueError, KeyError) as err:
        raise ValueError(f"adapter {str(path)!r} does not fit model {model_name!r}: {err}") from err


def merge_adapter(model: Any, adapter: str | Path, model_name: str) -> Any:
    """``model`` with the adapter directory ``adapter`` merged into its weights; a ValueError
    when the adapter was trained on another base model."""
    path = check_base(model, adapter, model_name)
    from peft import PeftModel

    try:
        adapted = PeftModel.from_pretrained(model, path)
    except (RuntimeError, ValueError, KeyError) as err:
        raise ValueError(f"adapter {str(path)!r} does not fit model {model_name!r}: {err}") from err
    return adapted.merge_and_unload().eval()
