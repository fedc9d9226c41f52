"""Registry.get loads the one plugin asked for: a report of a benchmark run imports no other kind."""
import subprocess
import sys

import pytest

from virtbench.errors import InputError
from virtbench.registry import Registry


def test_get_loads_only_that_plugin_and_names_unknown_ones_with_every_name():
    reg = Registry("virtbench.experiments", "experiment kind")
    kind = reg.get("benchmarks")
    assert reg._items is None and reg.get("benchmarks") is kind  # nothing else loaded
    assert "benchmarks" in reg.names() and reg.get("benchmarks") is kind  # the full load agrees
    with pytest.raises(InputError, match="benchmarks"):
        reg.get("no-such-kind")

def test_report_of_a_benchmark_run_does_not_import_other_kinds():
    code = ("import sys\nfrom virtbench.report.sections import in_main_table\n"
            "class R: campaign = {}\n"
            "assert in_main_table(R())\n"
            "print(sorted(m for m in sys.modules if m.startswith('virtbench.experiments.density')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_default_kind_is_in_the_main_table():
    """report.sections.in_main_table answers for 'benchmarks' without loading it: it must agree."""
    from virtbench.experiments.registry import EXPERIMENTS

    assert EXPERIMENTS.get("benchmarks").main_table is True
