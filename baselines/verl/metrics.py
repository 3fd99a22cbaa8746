"""The collaboration metrics of a verl batch, under the runner's logger names.

Every sample of the ``collab_bench`` agent loop carries its episode's metrics in
``extra_fields["reward_extra_info"]``, with the same keys on every sample: the per-episode metrics
of :mod:`benchmark.metrics.specs` under their ``<namespace>/<name>`` keys (``task/SR``,
``task/TR``, ``collab/B``, ``collab/redundancy``, ``comm/messages``, ``comm/influence_rate``, ...;
NaN where a metric is undefined for the episode), plus ``comm/messages_per_decision``.
verl's validation turns them into ``val-aux/collab_bench/<key>/mean@N`` (per agent row). For
training steps and validations, :func:`batch_metrics` reduces a batch to one value per key, which
the trainer (:mod:`.trainer`) adds to verl's step metrics; :func:`guard_readings` picks out what
the KL guard judges.

A batch holds one sample per agent of each episode copy, so each copy is counted once (by
``episode_id``). ``comm/messages_per_decision`` is the ratio of the summed messages to the
summed decisions, and every other key is the mean over copies, leaving out the NaNs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from baselines.verl.hub import MESSAGES_PER_DECISION


def _rows(non_tensor_batch: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, float]]]:
    """(episode_id, reward_extra_info) of each sample: from the per-sample ``extra_fields``
    dicts (verl V1, read back from TransferQueue) or from the columns verl V0 makes of them."""
    if "extra_fields" in non_tensor_batch:
        for fields in non_tensor_batch["extra_fields"]:
            missing = [k for k in ("episode_id", "reward_extra_info") if k not in fields]
            if missing:
                raise ValueError(
                    f"a sample's extra_fields lack {missing}: not a sample of the collab_bench "
                    f"agent loop (keys: {sorted(fields)[:12]})"
                )
            yield str(fields["episode_id"]), fields["reward_extra_info"]
        return
    missing = [k for k in ("episode_id", "reward_extra_info") if k not in non_tensor_batch]
    if missing:
        raise ValueError(
            f"non_tensor_batch lacks {missing}: not a batch of the collab_bench agent loop "
            f"(keys: {sorted(non_tensor_batch)[:12]})"
        )
    yield from zip(
        (str(e) for e in non_tensor_batch["episode_id"]),
        non_tensor_batch["reward_extra_info"],
        strict=True,
    )


def batch_metrics(non_tensor_batch: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """One value per metric key over the batch's episode copies (see the module docstring),
    each key prefixed by ``prefix`` (``"val/"``, say); ``episodes`` counts the copies."""
    episodes: dict[str, Mapping[str, float]] = {}
    for episode_id, info in _rows(non_tensor_batch):
        episodes.setdefault(episode_id, info)
    if not episodes:
        return {}
    out: dict[str, float] = {}
    keys = sorted({k for info in episodes.values() for k in info})
    for key in keys:
        values = [float(info[key]) for info in episodes.values() if key in info]
        finite = [v for v in values if not math.isnan(v)]
        if finite:
            out[prefix + key] = sum(finite) / len(finite)
    messages = [float(i["comm/messages"]) for i in episodes.values() if "comm/messages" in i]
    decisions = [float(i["task/L_decisions"]) for i in episodes.values() if "task/L_decisions" in i]
    if messages and decisions and sum(decisions) > 0:
        out[prefix + MESSAGES_PER_DECISION] = sum(messages) / sum(decisions)
    out[prefix + "episodes"] = float(len(episodes))
    return out


# The KL the guard judges: KL(policy || reference) as the actor's loss term computes it (with
# actor.use_kl_loss), else the PPO update's approximate KL between the old and the new policy.
KL_LOSS_KEY = "actor/kl_loss"
PPO_KL_KEY = "actor/ppo_kl"
EVAL_PREFIX = "eval/"  # held-out (validation) metrics, as the CPU trainer names its evaluations
INDEX_KEY = EVAL_PREFIX + "task/TR"  # the collaboration index: checklist atoms done, held out


def guard_readings(
    step_metrics: Mapping[str, Any], eval_metrics: Mapping[str, Any], use_kl_loss: bool
) -> dict[str, float]:
    """What the KL guard judges after an update: ``guard/kl``, the step's ``actor/kl_loss``
    when ``use_kl_loss`` else its ``actor/ppo_kl`` (nats per token), and ``guard/index``, the
    latest validation's ``eval/task/TR`` (a fraction). A reading that is absent (no validation
    yet, say) is left out."""
    out = {}
    kl_key = KL_LOSS_KEY if use_kl_loss else PPO_KL_KEY
    if kl_key in step_metrics:
        out["guard/kl"] = float(step_metrics[kl_key])
    if INDEX_KEY in eval_metrics:
        out["guard/index"] = float(eval_metrics[INDEX_KEY])
    return out
