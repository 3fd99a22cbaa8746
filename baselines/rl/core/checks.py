"""Checks of config values, with errors that name the field and what it allows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """A config value outside its allowed values; ``field`` is its (dotted) name."""

    def __init__(self, field: str, value: Any, requirement: str) -> None:
        self.field, self.value, self.requirement = field, value, requirement
        super().__init__(f"{field}={value!r} {requirement}")

    def within(self, section: str) -> ConfigError:
        """The same error, named from the enclosing ``section``."""
        return ConfigError(f"{section}.{self.field}", self.value, self.requirement)


def one_of(obj: Any, name: str, allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    if getattr(obj, name) not in allowed:
        raise ConfigError(name, getattr(obj, name), f"is not one of {allowed}")


def at_least(obj: Any, minimum: float, *names: str) -> None:
    for name in names:
        if getattr(obj, name) < minimum:
            raise ConfigError(name, getattr(obj, name), f"must be >= {minimum}")


def in_range(obj: Any, name: str, low: float, high: float) -> None:
    if not low <= getattr(obj, name) <= high:
        raise ConfigError(name, getattr(obj, name), f"must be in [{low}, {high}]")
