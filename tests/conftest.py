from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden/, the README's generated sections and schemas/ instead of comparing "
        "(review the diff!)",
    )
