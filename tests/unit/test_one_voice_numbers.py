"""Two numbers of #42's "Why" read one way on every surface a user reads, rendered from stored runs:
the terminal report (and --detail), the HTML file, the web run page, `compare` in the terminal and
the web's Before/after and compare pages.

- An interval that excludes 1 never reads as reaching it: before, one web interval read
  "[-3.4 to -0.0 %]" beside "slower" (bullet 2): a change interval's end was always printed with
  one decimal, so an upper end of -0.004 % became "-0.0".
- Lifecycle steps are the median in ms with one rule of digits (4 significant, notation.number):
  before, "lifecycle as 0.5148 / 247.2 / 23" (bullet 4): the report's table printed 23 ms as "23"
  beside "0.5148" and "247.2", the Before/after and compare pages the mean in seconds
  (`5.663e-04`, `0.0253`), `compare` the mean with 3 or 4 digits ("25.3 ms", "1.65 s").

The runs are built through the store API, as test_every_surface does, with values chosen so that
the interesting numbers land where the old rules went wrong: in run near-a docker is slower than
native by 1.6 % with the 95 % interval (paired by round) [-3.14, -0.004 %]; from near-a to near-b
native is slower by 2.1 % with the unpaired interval [-4.07, -0.004 %] (the Before/after row)."""
from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.store.db import Store, now

NATIVE_A = [3.1553832319, 3.185127744, 3.214872256, 3.2446167681]
"""sim-sqlite total_s (s, lower is better) of native in run near-a, round by round."""
DOCKER_A = [3.2435912909, 3.2489036855, 3.2539409839, 3.2587071152]
"""docker in near-a: its per-round ratios to native give the 95 % interval [-3.14, -0.0040 %]."""
NATIVE_B = [3.2217113485, 3.2520811088, 3.282450869, 3.3128206292]
"""native in near-b: against NATIVE_A (unpaired, Welch t) the interval [-4.07, -0.0040 %]."""
LIFE = {("native", "create"): 0.0005148, ("native", "start"): 0.2472, ("native", "stop"): 0.023,
        ("docker", "create"): 0.01234, ("docker", "start"): 1.5, ("docker", "stop"): 0.0007646}
"""Each lifecycle step's median in seconds; the rounds measure it times SPREAD (median 1, mean 1.1)."""
SPREAD = (0.9, 0.99, 1.01, 1.5)
SHOWN = {("native", "create"): "0.5148", ("native", "start"): "247.2", ("native", "stop"): "23.00",
         ("docker", "create"): "12.34", ("docker", "start"): "1500", ("docker", "stop"): "0.7646"}
"""LIFE's medians as the rule writes them: in ms, 4 significant digits, positional."""
SIGNED_ZERO = re.compile(r"[+-]0(\.0*)?")
CHANGE_INTERVAL = re.compile(r"\[([+±-]\d[\d.]*)(?: %)?(?:,| to) ([+±-]\d[\d.]*)")
"""A change interval in per cent, in the notation of now (`[-3.1, -0.004]`) or before (`[-3.1 to -0.0 %`)."""


def _make(store, run_id, native, docker):
    facts = synthetic.host_facts("sim-host")
    store.create_run(
        run_id=run_id, name="near", seed=0, host_id=store.upsert_host(facts), host_facts=facts, source="",
        campaign={"name": "near", "baseline": "native", "repetitions": 4, "warmups": 0, "shuffle": True},
        image={}, provenance={}, status="running",
        platforms=[{"name": p, "type": p, "label": p, "config": {"name": p, "type": p}} for p in ("native", "docker")],
        benchmarks=[{"key": "sim-sqlite", "name": "sim-sqlite", "params": {}, "tool_version": "sim 1.0",
                     "metrics": [{"name": "total_s", "unit": "s", "higher_is_better": False,
                                  "category": "application", "description": ""}]}])
    t = now()
    for rnd in range(4):
        for p, values in (("native", native), ("docker", docker)):
            store.record(run_id=run_id, round=rnd, warmup=False, platform=p, benchmark="sim-sqlite", status="ok",
                         started_at=t, finished_at=t + timedelta(seconds=1), duration_s=1.0,
                         samples=[{"metric": "total_s", "value": values[rnd], "unit": "s",
                                   "higher_is_better": False, "category": "application"}])
            life = [{"metric": f"{step}_s", "value": v * SPREAD[rnd], "unit": "s", "higher_is_better": False,
                     "category": "lifecycle"} for (q, step), v in LIFE.items() if q == p]
            store.record(run_id=run_id, round=rnd, warmup=False, platform=p, benchmark="lifecycle", status="ok",
                         started_at=t, finished_at=t, duration_s=0.1, samples=life)
            t += timedelta(seconds=2)
    store.set_status(run_id, "finished")


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory):
    """Every surface's text of run near-a and of the comparison near-a -> near-b."""
    from fastapi.testclient import TestClient

    from virtbench.report import html as report_html
    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    tmp = tmp_path_factory.mktemp("numbers")
    store = Store(f"sqlite:///{tmp / 's.db'}")
    _make(store, "near-a", NATIVE_A, DOCKER_A)
    _make(store, "near-b", NATIVE_B, [b * d / a for a, b, d in zip(NATIVE_A, NATIVE_B, DOCKER_A)])
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_html, "plotly_js", lambda: "")
        res = runner.invoke(cli, ["report", "near-a", "--html", str(tmp / "r.html"), "--db", store.url])
        assert res.exit_code == 0, res.output
    web = TestClient(create_app(Settings(db_url=store.url, token="t" * 24), store), base_url="http://testserver")
    return {
        "terminal": runner.invoke(cli, ["report", "near-a", "--db", store.url]).output,
        "terminal --detail": runner.invoke(cli, ["report", "near-a", "--detail", "--db", store.url]).output,
        "HTML file": _visible((tmp / "r.html").read_text()),
        "web run page": _visible(web.get("/runs/near-a").text),
        "compare": runner.invoke(cli, ["compare", "near-a", "near-b", "--db", store.url]).output,
        "web before/after": _visible(web.get("/compare/before-after?a=near-a&b=near-b").text),
        "web compare": _visible(web.get("/compare?run=near-a&run=near-b").text),
    }


def _visible(html: str) -> str:
    html = re.sub(r"<script.*?</script>|<style.*?</style>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def _flat(text: str) -> str:
    """The words of a text in one line: table rules and cell borders out, wrapped lines joined."""
    return " ".join(re.sub(r"[│┃┏┓┗┛┡┩┠┨╇━─┬┴┼╭╮╰╯]", " ", text).split())


def test_an_interval_that_excludes_zero_never_reads_as_reaching_it(surfaces):
    """No surface shows a change interval's end as a signed zero ("-0.0"), and the slower rows
    (docker in near-a, native from near-a to near-b) read with an upper end below zero."""
    zeros = {name: [m.group() for m in CHANGE_INTERVAL.finditer(_flat(text))
                    if any(SIGNED_ZERO.fullmatch(end) for end in m.groups())]
             for name, text in surfaces.items()}
    assert not any(zeros.values()), {name: z[:3] for name, z in zeros.items() if z}
    # what the reader sees beside "slower": the surfaces that print the verdict's reason
    for name in ("terminal", "terminal --detail", "HTML file", "web run page", "web before/after"):
        slower = re.findall(r"slower by [\d.]+ % " + CHANGE_INTERVAL.pattern, _flat(surfaces[name]))
        assert slower, f"{name} shows no slower row with its interval"
        assert all(float(hi.lstrip("±")) < 0 for _, hi in slower), (name, slower)
    assert any(hi == "-0.004" for _, hi in re.findall(CHANGE_INTERVAL, _flat(surfaces["web before/after"])))
    # the ratio form beside it: no interval of a ratio below 1 ends at "1.000" (F5 of the evidence)
    ones = {name: re.findall(r"\[\d\.\d+, 1\.000\] slower", _flat(text)) for name, text in surfaces.items()}
    assert not any(ones.values()), {name: o[:3] for name, o in ones.items() if o}


def _lifecycle_table(name: str, text: str) -> dict[tuple[str, str], str]:
    """The report's lifecycle table (platform x create, start, stop, remove) as its cells read."""
    flat = _flat(text)
    head = "Lifecycle (median ms per step"
    assert head in flat, f"{name} has no lifecycle table"
    table = flat[flat.index(head):]
    assert "platform create start stop remove" in table[:300], table[:300]
    out = {}
    for p in ("native", "docker"):
        m = re.search(rf"\b{p} (\S+) (\S+) (\S+) ", table)
        assert m, f"{name}: no lifecycle row of {p}"
        out.update({(p, step): cell for step, cell in zip(("create", "start", "stop"), m.groups())})
    return out


def _lifecycle_rows(name: str, text: str) -> dict[tuple[str, str], str]:
    """A comparison's lifecycle rows: the first value shown (run A's) of each platform and step."""
    flat = _flat(text)
    out = {}
    for p, step in LIFE:
        m = re.search(rf"lifecycle {step}_s (?:\[s\] )?↓ {p} (?:\d+ )?(-?\d[\d.,e+-]*(?: ms| s)?)", flat)
        assert m, f"{name}: no lifecycle row {step}_s of {p}"
        out[p, step] = m.group(1)
    return out


def test_lifecycle_steps_read_as_the_median_in_ms_with_one_rule_of_digits(surfaces):
    """Each lifecycle step of each platform reads the same on every surface: its median in ms to 4
    significant digits (`23.00` beside `0.5148` and `247.2`, never `23`, `25.3 ms` or `5.663e-04`)."""
    shown = {name: _lifecycle_table(name, surfaces[name]) for name in ("terminal", "HTML file", "web run page")}
    shown |= {name: _lifecycle_rows(name, surfaces[name]) for name in ("compare", "web before/after", "web compare")}
    want = {name: {k: v if name in ("terminal", "HTML file", "web run page") else f"{v} ms" for k, v in SHOWN.items()}
            for name in shown}
    wrong = {name: {f"{p} {step}": f"{cell!r}, the rule: {want[name][p, step]!r}"
                    for (p, step), cell in cells.items() if cell != want[name][p, step]}
             for name, cells in shown.items()}
    assert not any(wrong.values()), {name: w for name, w in wrong.items() if w}
