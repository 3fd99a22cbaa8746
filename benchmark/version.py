"""The benchmark's version, recorded in every trace and result row."""

__version__ = "0.1.0"
