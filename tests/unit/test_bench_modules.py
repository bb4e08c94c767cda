"""Every benchmark imports and starts as `python -m` starts it, and the cheap ones finish their smallest run:
a bench nobody runs for a round must not rot unseen."""

import importlib
import pkgutil
import runpy
import sys
import warnings

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.walk_packages(bench.__path__, "bench."))

# The smallest run of each bench that finishes in process in about a second: no daemon, no data set.
# The rest start daemons for seconds even at their smallest, or need a data set, a browser or the frozen
# binary; bench.mcp, bench.devsets, bench.facts_recall, bench.longmemeval and bench.scenarios have tests
# of their own under tests/integration.
SMALLEST = {
    "bench.compaction": ["--scopes", "2", "--writes", "2"],
    "bench.stored_text": ["--entries", "20", "--batch", "10", "--reads", "10", "--runs", "1"],
    "bench.pending_duplicates": ["--pending", "5", "--words", "10", "--checks", "3"],
    "bench.briefing": ["--entries", "20", "--runs", "1"],
    "bench.facts": ["--facts", "10", "--runs", "1", "--reads", "2"],
}
BROKEN: dict[str, str] = {}  # a bench this test found broken, with why, until it is mended


@pytest.mark.parametrize("name", MODULES)
def test_a_bench_module_runs_as_python_m_runs_it(name, monkeypatch, capsys):
    module = importlib.import_module(name)  # a helper it imports was removed: this is where that shows
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    code = None
    with warnings.catch_warnings():
        # Run again as __main__ after the import above, as `python -m` would run it fresh.
        warnings.filterwarnings("ignore", "'bench.* found in sys.modules", RuntimeWarning)
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        except SystemExit as done:
            code = done.code
    out, err = capsys.readouterr()
    if code is None:  # a library of the benches: run as a script it does nothing
        assert (out, err) == ("", "") and not hasattr(module, "main")  # a command that lost its __main__ line
    else:  # a command: it explains itself and stops
        assert code == 0, err
        assert "usage:" in out.lower() and "--help" in out


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xfail(raises=TypeError, strict=True, reason=BROKEN[n]))
             if n in BROKEN else n for n in sorted(SMALLEST)])
def test_a_cheap_bench_finishes_its_smallest_run(name, capsys):
    status = importlib.import_module(name).main(SMALLEST[name])
    assert status in (None, 0)
    assert capsys.readouterr().out.strip()  # it reported its figures
