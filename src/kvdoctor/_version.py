"""The one place kvdoctor's version is written: the package metadata (pyproject.toml) and every
report read it from here, and the core can import it without importing the package's faces."""

__version__ = "0.1.0"
