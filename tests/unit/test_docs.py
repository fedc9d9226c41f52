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
