"""#41's audit of the presets against the seeds: each difference is attributed to the paper values it
bears on, and what a preset does beyond the paper's stated method (a discarded warm-up round, the
count groups of Fig. 4 only) is a listed difference."""
from __future__ import annotations

import pytest

from virtbench.config import SHIPPED, load_campaign
from virtbench.studies import paper as P
from virtbench.studies.options import PAPER_COUNTS
from virtbench.studies.registry import STUDIES, study

PARTS = [(s, p) for s in STUDIES for p in s.parts]


@pytest.mark.parametrize("s, part", PARTS, ids=[f"{s.id}-{p.name}" for s, p in PARTS])
def test_a_discarded_warm_up_round_of_the_paper_preset_is_a_listed_difference(s, part):
    """No paper says it discarded a first round: a paper preset that does names it."""
    warm = [c for c in (load_campaign(SHIPPED / f"{stem}.yaml") for stem in part.campaign_stems(s.id, "paper"))
            if c.warmups]
    if warm:
        assert any("warm-up" in d.what and "paper" in d.scales for d in part.differences), \
            f"{s.id} {part.name}: {warm[0].name} discards {warm[0].warmups} round(s), no difference says so"


def test_004_pinning_difference_names_every_value_of_a_pinned_line():
    """What `node` and `core` mean here bears on every value read from a pinned line (Figs. 3-8)."""
    part = study("004").part("line")
    pinning = next(d for d in part.differences if d.what.startswith("pinning `node`"))
    for v in P.load("004").values:
        where = (v.yours.where or {}) if v.yours else {}
        if where.get("pinning") in ("node", "core") or v.id in ("pin-rate", "core-pin"):
            assert v.id in pinning.affects, f"{v.id} ({v.where}) is read from a pinned line"
    assert "p-tail-4-none" not in pinning.affects


def test_000_figs_8_to_11_are_not_held_to_fig_4s_groups():
    """The paper states its counts for Fig. 4 only; the maxima of Figs. 8-11 (56, 55, 6, 21) are not among
    them, so those parts' ramp difference says so, and the setting's note too."""
    values = {v.id: v for v in P.load("000").values}
    for name, prefix in (("density-ram", "ram-max-"), ("density-hostram", "hostram-")):
        part = study("000").part(name)
        outside = [vid for vid, v in values.items() if vid.startswith(prefix) and v.paper
                   and v.paper.get("value") not in PAPER_COUNTS]
        assert outside, name
        ramp = next(d for d in part.differences if d.option == "paper-counts")
        assert "Figs. 8-11" in ramp.why and set(outside) <= set(ramp.affects), name
        counts = next(st for st in part.settings if "counts.groups" in st.values)
        assert "Figs. 8-11" in counts.note, name
    fig4 = next(d for d in study("000").part("density-os-3des").differences if d.option == "paper-counts")
    assert "Figs. 8-11" not in fig4.why


def test_000_count_decrease_is_attributed_where_the_paper_says_it():
    """'performance decreased as the number of containers increased': Sections IV.A (Figs. 4-7) and IV.B
    (Figs. 8-9); IV.C says the board's RAM had a minimal effect and states no trend."""
    v = next(v for v in P.load("000").values if v.id == "count-decrease")
    assert (v.where, v.section) == ("Figs. 4-9", "IV.A-B")


def test_003_one_machine_bears_on_every_table_averaged_over_the_three_machines():
    """Tables 5 and 6 average each row over the three machines, Table 7 ranges over them."""
    for part in study("003").parts:
        one = next(d for d in part.differences if d.what.startswith("one machine"))
        tables = {v.id for v in P.load("003").values if v.where in ("Table 5", "Table 6", "Table 7")}
        assert tables <= set(one.affects), (part.name, tables - set(one.affects))
