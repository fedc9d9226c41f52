from pathlib import Path

from virtbench.docs import END, START, readme_section, update_readme

README = Path(__file__).parents[2] / "README.md"


def test_readme_reference_matches_the_registry():
    text = README.read_text()
    assert START in text and END in text
    assert update_readme(text) == text, "regenerate with: python -m virtbench.docs (see tools/update-readme)"


def test_every_benchmark_and_platform_is_listed():
    from virtbench.registry import BENCHMARKS, PLATFORMS

    section = readme_section()
    for name in BENCHMARKS.names() + PLATFORMS.names():
        assert f"`{name}`" in section


def test_list_benchmarks_shows_every_metric_with_its_label_and_description():
    """Before: only the default parameters' metrics, without descriptions: fio's `_cpu` metrics
    (CPU µs per I/O) and openssl's throughput_cpu were nowhere to be read."""
    from click.testing import CliRunner

    from virtbench.cli import cli

    out = CliRunner().invoke(cli, ["list", "benchmarks"], env={"COLUMNS": "300"}).output
    fio = next(line for line in out.splitlines() if line.strip().startswith("rand_read_iops_cpu "))
    assert "[µs of CPU per I/O] ↓ storage: CPU time (user + sys) per I/O" in fio
    assert any(line.strip().startswith("throughput_cpu [B/s of CPU time] ↑ cpu:") for line in out.splitlines())
