"""A run over several hosts is laid out one host at a time (report/layout.py), in the HTML
file and on the web run page as in the text report: each host's tables hold its own rows only,
its title names it, and each host is compared with its own baseline."""
from __future__ import annotations

import re

from virtbench.analysis import synthetic
from virtbench.report import builder, figures, html, layout

HOSTS = ["pi-a", "pi-b"]


def _tables_by_heading(page: str) -> dict[str, str]:
    """HTML after each <h3 id=...>, up to the next one."""
    parts = re.split(r'<h3 id="([^"]+)"', page)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_every_part_of_a_multi_host_run_is_per_host(filled, client, tmp_path):
    synthetic.fill(filled, "mh1", repetitions=4, hosts=HOSTS)
    report = builder.build(filled, "mh1")
    keys = [s.key for s in layout.of(report)]
    for h in HOSTS:
        assert f"results@{h}" in keys and f"statistics@{h}" in keys and f"failures@{h}" in keys
    assert "results" not in keys  # no table mixing the hosts' rows
    for s in layout.of(report):
        if "@" in s.key:
            host = s.key.split("@", 1)[1]
            assert s.title.startswith(f"host {host}: ")
            text = repr([t.rows for t in s.tables])
            assert all(f"@{other}" not in text for other in HOSTS if other != host), s.key

    page = html.render([report])
    blocks = _tables_by_heading(page)
    assert blocks["results@pi-a"].count("@pi-a") >= 4 and "@pi-b" not in blocks["results@pi-a"]
    assert blocks["results@pi-b"].count("@pi-b") >= 4 and "@pi-a" not in blocks["results@pi-b"]
    assert page.count('id="statistics@') == 2  # the closing parts once per host, not twice

    figs = figures.run_figures(report.run, report.rows)  # each host's figures, not one host's silently
    box = {f.id: f for f in figs if f.kind == "box"}
    for h in HOSTS:
        mine = [f for i, f in box.items() if i.startswith(f"{h}-box-")]
        assert mine and all(f.title.startswith(f"host {h}: ") for f in mine)
        assert all(len(s.y) == 4 for f in mine for s in f.series)  # its 4 rounds, not the other host's
    assert len(figs) == 2 * len(figures.run_figures(report.run, [r for r in report.rows if r.host == "pi-a"]))
    assert page.count("host pi-b: ") >= 2  # figure titles too

    web = client.get("/runs/mh1").text
    assert "host pi-a: " in web and "host pi-b: " in web
    web_blocks = _tables_by_heading(web)
    assert "@pi-b" not in web_blocks["results@pi-a"]


def test_a_one_host_run_keeps_its_layout(filled):
    keys = [s.key for s in layout.of(builder.build(filled, "r1"))]
    assert "results" in keys and not any("@" in k for k in keys)
