"""The line experiment's pieces that need no network: iperf 2 parsing on recorded outputs,
HDR histograms, and the NDR/PDR searches against a simulated device."""
from __future__ import annotations

import pytest

from virtbench.errors import ParseError
from virtbench.experiments.line import hdr, iperf2, search
from virtbench.experiments.line.iperf2 import Trial


def read(data_dir, name):
    return (data_dir / "iperf2" / f"{name}.txt").read_text()


def test_parse_loss_free_trial(data_dir):
    t = iperf2.parse(20000, 1, read(data_dir, "client-20kpps"), read(data_dir, "server-20kpps"))
    assert (t.sent, t.received, t.loss) == (19992, 19992, 0.0)
    assert sum(t.bins.values()) == 19992 and t.bins[3] == 15386 and t.above == 0
    assert len(t.worst_ms) == 10 and t.worst_ms[0] == (0.1, 0.332)
    assert t.max_ms == 0.332


def test_parse_overload_counts_the_loss(data_dir):
    t = iperf2.parse(1_000_000, 1, read(data_dir, "client-overload"), read(data_dir, "server-overload"))
    assert t.sent == 92544 and t.received == 92544 - 43894
    assert t.loss == pytest.approx(43894 / 92544)
    assert t.offered_pps < 1_000_000 / 5  # the generator fell far short of the asked rate


def test_parse_without_sink_report_is_an_error(data_dir):
    with pytest.raises(ParseError, match="final report"):
        iperf2.parse(1000, 1, read(data_dir, "client-noserver"), "")
    with pytest.raises(ParseError, match="Sent N datagrams"):
        iperf2.parse(1000, 1, "", read(data_dir, "server-20kpps"))


def test_hdr_from_bins_round_trips_and_limits_percentiles(data_dir):
    t = iperf2.parse(20000, 1, read(data_dir, "client-20kpps"), read(data_dir, "server-20kpps"))
    h = hdr.from_bins(t.bins)
    back = hdr.decode(hdr.encode(h))
    assert back.get_total_count() == 19992
    s = hdr.summary_us(back)
    assert s["p50"] == pytest.approx(2.5, abs=0.01)  # bin 3 = [2, 3) us, recorded at 2.5 us
    assert s["p99.9"] is not None and s["p99.99"] is None and s["p99.999"] is None  # 19992 packets
    assert s["max"] == pytest.approx(332.5, rel=0.002) and s["count"] == 19992
    curve = hdr.percentile_curve(back)
    assert curve[-1][0] < 99.95 and curve == sorted(curve)


def test_a_throttled_sender_fails_the_goal_whatever_the_loss():
    """The line's forwarding runs in the sender's context: it sends less than asked, all arrives."""
    def throttled(rate: float, seconds: float) -> Trial:
        sent = int(min(rate, 7000) * seconds)
        return Trial(rate_pps=rate, seconds=seconds, sent=sent, received=sent)

    r = search.ndr_pdr(throttled, max_rate=70_000, min_rate=70, trial_seconds=1, final_seconds=1, precision=0.01)
    assert 6900 <= r.ndr_pps <= 7000 / 0.99 and r.complete  # sustained: sent within 1 % of the rate
    assert not throttled(70_000, 1).sustained and throttled(7000, 1).sustained


class Device:
    """A simulated line: loss-free up to `ndr`, then losing more as the rate grows."""

    def __init__(self, ndr: float, pdr: float, send_max: float = 1e9):
        self.ndr, self.pdr, self.send_max, self.calls = ndr, pdr, send_max, []

    def __call__(self, rate: float, seconds: float) -> Trial:
        self.calls.append((rate, seconds))
        sent = int(min(rate, self.send_max) * seconds)
        if rate <= self.ndr:
            loss = 0.0
        elif rate <= self.pdr:
            loss = 0.004 * (rate - self.ndr) / (self.pdr - self.ndr)
        else:
            loss = 0.01 + (rate - self.pdr) / rate
        return Trial(rate_pps=rate, seconds=seconds, sent=sent, received=int(sent * (1 - loss)))


def test_ndr_pdr_finds_both_within_precision_in_few_trials():
    dev = Device(ndr=31_000, pdr=40_000)
    r = search.ndr_pdr(dev, max_rate=120_000, min_rate=100, trial_seconds=1, final_seconds=5, precision=0.01)
    assert r.complete
    assert 31_000 * 0.99 <= r.ndr_pps <= 31_000 and 40_000 * 0.99 <= r.pdr_pps <= 40_000
    assert len(r.trials) <= 25
    assert [s for _, s in dev.calls].count(5) == 2  # one final-duration confirmation per goal


def test_ndr_pdr_when_the_line_is_not_the_bottleneck():
    dev = Device(ndr=1e9, pdr=1e9)
    r = search.ndr_pdr(dev, max_rate=100_000, min_rate=100, trial_seconds=1, final_seconds=2, precision=0.01)
    assert (r.ndr_pps, r.pdr_pps, len(r.trials)) == (100_000, 100_000, 2)  # one short, one final


def test_ndr_pdr_nothing_passes():
    dev = Device(ndr=-1, pdr=-1)
    r = search.ndr_pdr(dev, max_rate=100_000, min_rate=100, trial_seconds=1, final_seconds=1, precision=0.01)
    assert (r.ndr_pps, r.pdr_pps) == (0.0, 0.0) and len(r.trials) < 40


def test_stepped_search_is_the_studys():
    dev = Device(ndr=3500, pdr=4500)
    r = search.steps(dev, start=1000, step=1000, seconds=20, max_rate=100_000)
    assert (r.ndr_pps, r.pdr_pps) == (3000, 4000)
    assert [c[0] for c in dev.calls] == [1000, 2000, 3000, 4000, 5000] and {c[1] for c in dev.calls} == {20}


class Fig3Device:
    """The paper's 64-node line (Fig. 3): loss from 17.3 to 50 kpkt/s, none from 50 to 55, then
    loss growing linearly with the rate."""

    def __call__(self, rate: float, seconds: float) -> Trial:
        sent = int(rate * seconds)
        if rate < 17_300 or 50_000 <= rate <= 55_000:
            loss = 0.0
        elif rate < 50_000:
            loss = 0.02
        else:
            loss = (rate - 55_000) / rate
        return Trial(rate_pps=rate, seconds=seconds, sent=sent, received=int(round(sent * (1 - loss))))


def test_stepped_search_traces_the_loss_curve_past_the_first_loss():
    stopped = search.steps(Fig3Device(), start=1000, step=1000, seconds=20, max_rate=100_000)
    traced = search.steps(Fig3Device(), start=1000, step=1000, seconds=20, max_rate=100_000, past_loss=50)
    assert (traced.ndr_pps, traced.pdr_pps) == (stopped.ndr_pps, stopped.pdr_pps) == (17_000, 17_000)
    assert stopped.trials[-1].rate_pps == 18_000  # the old search ends at the first loss
    rates = [t.rate_pps for t in traced.trials]
    assert rates[-1] == 18_000 + 50 * 1000 and len(rates) == len(set(rates))
    loss = {t.rate_pps: t.loss for t in traced.trials}
    assert loss[30_000] > 0 and loss[52_000] == 0 and loss[60_000] < loss[68_000]  # non-monotonic, then linear
    capped = search.steps(Fig3Device(), start=1000, step=1000, seconds=20, max_rate=20_000, past_loss=50)
    assert capped.trials[-1].rate_pps == 20_000  # never above the largest rate


def test_worst_latencies_are_selected_from_the_recorded_intervals(data_dir):
    t = iperf2.parse(20000, 1, read(data_dir, "client-20kpps"), read(data_dir, "server-20kpps"))
    assert len(t.intervals) == 11 and sum(sum(b.values()) for _, b in t.intervals) == 19992  # 10 x 100 ms + the rest
    worst = iperf2.worst(t.intervals, 5)
    assert worst == [[0.1, 332.5, 1], [0.1, 330.5, 1], [0.1, 328.5, 1], [1.0, 80.5, 1], [0.1, 75.5, 1]]
    many = iperf2.worst(t.intervals, 5000)
    assert sum(c for _, _, c in many) == 5000 and [u for _, u, _ in many] == sorted((u for _, u, _ in many), reverse=True)
    assert all(u >= 2.5 for _, u, _ in many)  # 5000 of 19992: down into the 3 us bin, never the 2 us bin
