"""The reference policy a run's KL is measured against (the KL penalty of the loss, the KL
guard): the weights the run started from.

A full model keeps a frozen copy of its starting weights. Under LoRA only the adapter weights
are kept, and the reference scores with them swapped into the one model (then put back), so a
run that starts from a trained adapter (SFT, DAgger) is measured against that start; before
:meth:`Reference.freeze` the LoRA reference is the base model (adapters switched off).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

Weights = dict[str, torch.Tensor]


class Reference:
    """The reference of one policy's ``model``; ``weights`` and ``load_weights`` read and
    write that policy's trainable tensors (the adapters under LoRA)."""

    def __init__(
        self,
        model: nn.Module,
        lora: bool,
        weights: Callable[[], Weights],
        load_weights: Callable[[Weights], None],
    ) -> None:
        self.policy_model = model
        self.lora = lora
        self.weights = weights
        self.load_weights = load_weights
        self.model: nn.Module | None = None  # the frozen copy (full models)
        self.adapter: Weights | None = None  # the frozen adapter weights (LoRA)

    @property
    def exists(self) -> bool:
        """Whether there is something to measure against (LoRA always has the base model)."""
        return self.lora or self.model is not None

    def freeze(self) -> None:
        """Take the policy's current weights as the reference (before training starts)."""
        if self.lora:
            self.adapter = self.weights()
        else:
            self.model = None
            self.frozen_model()

    def frozen_model(self) -> nn.Module:
        """A frozen copy of the full model's weights (made on first use)."""
        if self.model is None:
            self.model = copy.deepcopy(self.policy_model).eval()
            for p in self.model.parameters():
                p.requires_grad_(False)
        return self.model

    @contextmanager
    def scoring(self, reference: bool) -> Iterator[nn.Module]:
        """The model that scores: the policy's own, or (``reference``) the reference."""
        if not reference:
            yield self.policy_model
        elif not self.lora:
            yield self.frozen_model()
        elif self.adapter is None:
            with self.policy_model.disable_adapter():
                yield self.policy_model
        else:
            current = self.weights()
            self.load_weights(self.adapter)
            try:
                yield self.policy_model
            finally:
                self.load_weights(current)
