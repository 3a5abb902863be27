"""Wheel build hook: the model and GPU catalogs also as JSON, so a diagnosis loads them in about a
millisecond instead of parsing YAML (issue 11). The YAML files stay the source of truth; an
editable install reads them directly (kvdoctor.memory.catalog falls back to them)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DATA = Path("src/kvdoctor/memory/data")


class CatalogJsonHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        out = Path(tempfile.mkdtemp(prefix="kvdoctor-catalog-"))
        for source in sorted((Path(self.root) / DATA).glob("*.yaml")):
            target = out / (source.stem + ".json")
            data = yaml.safe_load(source.read_text(encoding="utf-8"))
            target.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True), encoding="utf-8")
            build_data["force_include"][str(target)] = f"kvdoctor/memory/data/{target.name}"
