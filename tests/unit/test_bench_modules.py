"""Every benchmark still imports and answers --help: a bench nobody runs for a round must not rot unseen."""

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.walk_packages(bench.__path__, "bench."))


@pytest.mark.parametrize("name", MODULES)
def test_a_bench_imports_and_explains_itself(name, capsys):
    module = importlib.import_module(name)
    main = getattr(module, "main", None)
    if main is None:
        return  # a library of the benches (bench.longmemeval.metrics...), not a command
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "usage:" in capsys.readouterr().out.lower()
