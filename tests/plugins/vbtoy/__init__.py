"""A throwaway third-party virtbench plugin package (tests/integration/test_plugins.py): one
benchmark, platform, probe, experiment kind and report part each, registered only through the
entry points of a distribution the test writes (`vbtoy-0.dist-info`), as a real plugin would be."""
