from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden/, the docs' generated sections and schemas/ instead of comparing "
        "(review the diff!)",
    )


# No run depends on a local `.hypothesis` database: a failure hypothesis finds is printed with
# its example, which is then pinned with `@example` beside the test. `HYPOTHESIS_PROFILE=dev`
# keeps the database for replaying while debugging; `--hypothesis-seed=N` varies the search.
# Each property draws EXAMPLES examples (a test that needs more asks for a multiple), new ones
# every run, so the suite stays within two minutes on a shared two-core machine while runs add
# up to a wide search; `HYPOTHESIS_PROFILE=thorough` searches ten times as far in one run.
# Time is no property: a loaded machine (a shared CI runner, two CPU spinners) draws and runs
# examples slowly, which is no failure of the code under test, so no profile has a deadline or
# the `too_slow` health check, for every test alike (a test's own `suppress_health_check`
# replaces the profile's list: it names `too_slow` again). Speed is measured in bench/.
EXAMPLES = 25
UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile(
    "kfcompile", database=None, print_blob=True, max_examples=EXAMPLES, **UNTIMED
)
settings.register_profile(
    "thorough", database=None, print_blob=True, max_examples=10 * EXAMPLES, **UNTIMED
)
settings.register_profile("dev", print_blob=True, max_examples=EXAMPLES, **UNTIMED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kfcompile"))


@pytest.fixture(autouse=True)
def _discovery_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test its own discovery cache (``kfcompile_kube.discovery``): a fake API server that
    gets the port of an earlier test's must not inherit what that one served. Nor a MultiKueue
    cluster mapping of the user's (``kfcompile_local.clusters``): a test gives its own."""
    monkeypatch.setenv("KFCOMPILE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.delenv("KFCOMPILE_CLUSTERS", raising=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every request the cluster commands made in this session must be allowed by the Role
    `kfcompile rbac` prints (tests/fakekube/audit.py): one line per request that is not, and the
    session fails."""
    from fakekube.audit import AUDIT, denied

    problems = denied(AUDIT)
    if not problems:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["requests the Role of `kfcompile rbac` does not allow:", *problems]
    if reporter is not None:
        reporter.section("kfcompile rbac", sep="=", red=True)
        for line in lines:
            reporter.line(line, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What was skipped and why: one line per reason, with its count. (pyproject's ``-r``
    leaves skips out of pytest's own summary, which gives a line per test location: about 100
    of them, all one reason, in a clone without the reference CRDs.)"""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count} skipped: {reason}", yellow=True)
