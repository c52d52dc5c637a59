"""The site's one MkDocs hook: ```` ```mermaid ```` blocks are drawn as SVG while the site is
built (``diagrams``), so no page loads mermaid.js from a CDN."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import diagrams


def on_config(config: Any) -> Any:
    fences = config["mdx_configs"].setdefault("pymdownx.superfences", {})
    fences["custom_fences"] = [
        {"name": "mermaid", "class": "kf-diagram", "format": diagrams.fence},
    ]
    return config
