"""The claims judged by rules of their own (studies/claims.py), each from synthetic report data of the
shape the experiments produce: 000's migration media, count trend, AES across boards and delay by size;
004's pinning and spikes."""
from __future__ import annotations

from types import SimpleNamespace

from virtbench.studies import compare as C
from virtbench.studies import paper as P
from virtbench.studies import report as sreport
from virtbench.studies import verdicts as V
from virtbench.studies.registry import study


def _value(sid: str, vid: str) -> P.PaperValue:
    return next(v for v in P.load(sid).values if v.id == vid)


def _run(name: str, sections: list, facts: dict | None = None, rid: str = "r"):
    run = SimpleNamespace(name=name, id=rid, platforms=[], benchmarks=[], campaign={}, host=None,
                          host_facts=facts or {"cpus": 2})
    return SimpleNamespace(run=run, rows=[], sections=sections)


def _migration(dests: dict[str, tuple[float, float, float, float]]):
    """A migration section: per destination (label -> write MB/s, path MB/s, mean total s, half-width)."""
    storage = {"source": {"kind": "ext4 on vda (ssd)", "read_MBps": 900.0}}
    points = []
    for label, (write, path, total, half) in dests.items():
        storage[label] = {"host": "pi5-b", "kind": f"ext4 on sda (ssd, {label})", "write_MBps": write,
                          "path_throughput": {"MBps": path}}
        points.append({"platform": "lxc", "to": label, "count": 8,
                       "metrics": {"total_s": {"mean": total, "ci95": [total - half, total + half], "n": 5}}})
    return SimpleNamespace(key="migration", data={"storage": storage, "points": points})


def _judge(sid: str, vid: str, reports: list) -> dict:
    runs = sreport.part_runs(study(sid), reports)
    return V.judge(_value(sid, vid), C.Matcher(runs), {}, P.load(sid).categories)


def test_migration_claim_needs_a_cross_host_move_between_differing_media():
    local = _run("study000-migration-paper", [SimpleNamespace(key="migration", data={
        "storage": {"other-dir": {"kind": "ext4 on vda (rot)", "write_MBps": 300.0}}, "points": []})])
    out = _judge("000", "migration-claim", [local])
    assert out["verdict"] == "not measured here" and "--hosts NAME" in out["detail"]
    one = _run("study000-migration-paper", [_migration({"usb": (35.0, 110.0, 60.0, 2.0)})])
    out = _judge("000", "migration-claim", [one])
    assert out["verdict"] == "not measured here" and "another medium" in out["detail"]


def test_migration_claim_judged_from_two_media():
    # USB 2.0 (35 MB/s) below the 1 Gbit/s path (110 MB/s), USB 3.0 (300 MB/s) above it: the slow medium
    # bounds its move, which takes about 3x as long: the paper's RPi 4B.
    usb = _run("study000-migration-paper", [_migration({"usb2": (35.0, 110.0, 60.0, 2.0),
                                                         "usb3": (300.0, 110.0, 20.0, 1.0)})])
    out = _judge("000", "migration-claim", [usb])
    assert out["verdict"] == "agrees", out
    # both media above the path (the RPi 5's PCIe Gen 2 and 3): the network bounds both alike
    nvme = _run("study000-migration-paper", [_migration({"gen2": (400.0, 110.0, 20.0, 0.5),
                                                          "gen3": (800.0, 110.0, 19.8, 0.5)})])
    assert _judge("000", "migration-claim", [nvme])["verdict"] == "agrees"
    odd = _run("study000-migration-paper", [_migration({"gen2": (400.0, 110.0, 40.0, 0.5),
                                                         "gen3": (800.0, 110.0, 20.0, 0.5)})])
    assert _judge("000", "migration-claim", [odd])["verdict"] == "differs"


def _density(platform: str, at1: float, top: list[float], count: int):
    entry = {"platform": platform, "throughput_at_1": at1, "max_count": count,
             "points": [{"count": 1, "ok": True, "per_instance": [at1]},
                        {"count": count, "ok": True, "per_instance": top}]}
    return SimpleNamespace(key="density", data=[entry])


def test_density_trend_and_aes_across_boards():
    falls = _run("study000-density-os-aes-quick", [_density("lxc-bookworm", 100.0, [60.0, 62.0, 61.0, 59.0], 4)])
    assert _judge("000", "count-decrease", [falls])["verdict"] == "agrees"
    flat = _run("study000-density-os-aes-quick", [_density("lxc-bookworm", 100.0, [99.9, 100.1, 100.0, 99.95], 4)])
    assert _judge("000", "count-decrease", [flat])["verdict"] == "differs"
    rpi4 = _run("study000-density-os-aes-quick", [_density("lxc-bookworm", 96.3, [50.0, 50.0], 2)],
                {"aes": False}, "a")
    out = _judge("000", "aes-factor", [rpi4])
    assert out["verdict"] == "not measured here" and "two hosts" in out["detail"]
    runs = [_run("study000-density-os-aes-quick", [_density("lxc-bookworm", at1, [1.0, 1.0], 2)], {"aes": aes}, rid)
            for at1, aes, rid in ((96.3, False, "a"), (97.0, False, "b"), (2693.7, True, "c"), (2650.0, True, "d"))]
    out = _judge("000", "aes-factor", runs)
    assert out["verdict"] == "agrees" and 22 < out["yours"] < 41, out


def _line(entries: list[dict]):
    return SimpleNamespace(key="line", data=entries)


def test_pinning_and_spikes_from_the_line_section():
    entries = [{"platform": "lxc", "pinning": pin, "length": 4, "ndr_pps": 0.0, "ndr_pps_rounds": rates,
                "latency": [{"rate": "1ndr", "rate_pps": 50000, "p99.99_rounds": tails},
                            {"rate": "17300", "rate_pps": 17300, "max": mx, "p99.9": 100.0}]}
               for pin, rates, tails, mx in (("none", [40000, 41000, 40500], [900, 950, 920], 180.0),
                                             ("node", [50000, 51000, 50500], [700, 720, 710], 5200.0),
                                             ("core", [50000, 50500, 50200], [400, 410, 405], 150.0))]
    run = _run("study004-line-paper", [_line(entries)])
    assert _judge("004", "pin-rate", [run])["verdict"] == "agrees"
    assert _judge("004", "core-pin", [run])["verdict"] == "agrees"
    assert _judge("004", "spikes", [run])["verdict"] == "agrees"


def test_repeated_runs_of_a_part_pool_into_an_interval():
    """One density run gives one maximum (undecided: no interval); three runs of the part give a t interval,
    which decides a value far from the paper's."""
    one = [_run("study000-density-ram-paper", [_density("lxc-128m", 100.0, [50.0, 51.0], n)], rid=f"r{n}")
           for n in (12,)]
    out = _judge("000", "ram-max-128-rpi4", one)
    assert out["verdict"] == "undecided at this scale" and "3 runs or more" in out["detail"]
    three = [_run("study000-density-ram-paper", [_density("lxc-128m", 100.0, [50.0, 51.0], n)], rid=f"r{n}")
             for n in (12, 13, 12)]
    out = _judge("000", "ram-max-128-rpi4", three)
    assert out["verdict"] == "differs" and out["ci"] and "3 runs" in out["detail"], out


def test_per_core_pinning_is_judged_on_lines_the_paper_could_pin_and_node_pinning_on_latency():
    """The paper pinned per core up to 8 nodes (its CPU's limit): a 16-node line overcommitted
    round robin made core-pin 'differ'. Node against none on the tail: the abstract's 'pinning
    decreases latencies', not judged before."""
    def entry(pin: str, length: int, tails: list[float]) -> dict:
        return {"platform": "lxc", "pinning": pin, "length": length, "ndr_pps": 0.0, "ndr_pps_rounds": [1.0, 1.0],
                "latency": [{"rate": "1ndr", "rate_pps": 50000, "p99.99_rounds": tails}]}

    entries = [entry("none", 4, [900, 950, 920]), entry("node", 4, [700, 720, 710]), entry("core", 4, [400, 410, 405]),
               entry("node", 16, [800, 810, 805]), entry("core", 16, [3000, 3100, 3050])]
    run = _run("study004-line-paper", [_line(entries)])
    out = _judge("004", "core-pin", [run])
    assert out["verdict"] == "agrees" and "16 nodes" not in out["yours"], out
    assert _judge("004", "pin-latency", [run])["verdict"] == "agrees"
    worse = _run("study004-line-paper", [_line([entry("none", 4, [700, 710, 705]), entry("node", 4, [900, 950, 920])])])
    assert _judge("004", "pin-latency", [worse])["verdict"] == "differs"
