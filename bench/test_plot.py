#!/usr/bin/env python3
"""Tests of bench/plot.py's verdict rules (R1, R2; bench/results-intro.md) and of the run
effect between two runs (bench/run_variance.py). Run by
scripts/test.sh: python3 bench/test_plot.py"""

import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402
import estimator  # noqa: E402
import run_variance  # noqa: E402
from plot import AGREES, DIFFERS, INCONCLUSIVE, INF, all_of, rint, within  # noqa: E402


def test_ratio_interval():
    r, lo, hi = rint((200.0, 20.0), (100.0, 10.0))
    assert r == 2.0
    w = math.sqrt(0.1**2 + 0.1**2)
    assert abs(lo - 2 * math.exp(-w)) < 1e-12 and abs(hi - 2 * math.exp(w)) < 1e-12
    assert math.isnan(rint((math.nan, 1.0), (1.0, 1.0))[0])
    assert rint((5.0, math.nan), (5.0, math.nan)) == (1.0, 1.0, 1.0)


def test_r1_three_outcomes():
    assert within((1.5, 1.2, 1.8), 1, INF) == AGREES
    assert within((0.5, 0.4, 0.6), 1, INF) == DIFFERS
    assert within((1.05, 0.9, 1.2), 1, INF) == INCONCLUSIVE, "straddles: not a verdict by direction"
    assert within((1.13, 1.125, 1.135), 1.12, 1.14) == AGREES
    assert within((1.30, 1.2, 1.4), 1.12, 1.14) == DIFFERS
    assert within((math.nan,) * 3, 0, 1) == INCONCLUSIVE


def test_r2_every_member():
    assert all_of([AGREES, AGREES]) == AGREES
    assert all_of([AGREES, INCONCLUSIVE]) == INCONCLUSIVE
    assert all_of([AGREES, INCONCLUSIVE, DIFFERS]) == DIFFERS
    assert all_of([]) == INCONCLUSIVE


def test_direction_alone_is_not_enough():
    # The reviewer's case: 852 ± 15 against 794 ± 80 is not "slower".
    assert within(rint((852.0, 15.0), (794.0, 80.0)), 1, INF) == INCONCLUSIVE
    # And 1,322 ± 121 against 714 ± 28 is a significant slowdown: "unaffected" differs.
    assert within(rint((1322.0, 121.0), (714.0, 28.0)), 1 / plot.SAME, plot.SAME) == DIFFERS


def test_compare_flags_every_changed_verdict():
    run1 = [
        ("A", "x", "2.0x", AGREES),
        ("A", "y", "", DIFFERS),
        ("B", "z", "", INCONCLUSIVE),
        ("B", "only in run 1", "", AGREES),
    ]
    run2 = [
        ("B", "z", "", INCONCLUSIVE),
        ("A", "x", "1.1x", INCONCLUSIVE),
        ("A", "y", "", DIFFERS),
        ("C", "only in run 2", "", DIFFERS),
    ]
    rows = {(sec, claim): (a, b, both) for sec, claim, a, b, both in plot.compare(run1, run2)}
    assert rows[("A", "x")] == (("2.0x", AGREES), ("1.1x", INCONCLUSIVE), plot.UNSTABLE)
    assert rows[("A", "y")][2] == DIFFERS
    assert rows[("B", "z")][2] == INCONCLUSIVE, "matched by claim, not position"
    assert rows[("B", "only in run 1")] == (("", AGREES), None, plot.UNSTABLE)
    assert rows[("C", "only in run 2")] == (None, ("", DIFFERS), plot.UNSTABLE)
    assert len(rows) == 5


def test_runs_of_two_machines_or_commits_are_named():
    def exp(kernel, commit, reporting=None):
        m = {"cpu": "AMD EPYC", "cores": 2, "kernel": kernel, "flush": "clwb", "simd": "avx2",
             "image_mount": "tmpfs huge=always"}
        if reporting:
            m["free_page_reporting"] = reporting
        return {"machine": m, "git_commit": commit}
    run1 = {"locality": exp("v782", "abc", "off"), "iosize": exp("v782", "abc"), "only1": exp("v1", "x")}
    run2 = {"locality": exp("v782", "abc", "off"), "iosize": exp("v595", "def", "on"), "only2": exp("v2", "y")}
    assert plot.runs_differ(run1, run2) == ["iosize: commit abc / def", "iosize: kernel v782 / v595"]
    assert plot.runs_differ(run1, {"locality": exp("v782", "abc", "off")}) == []


def _run(means, ci_share=0.01, images=5):
    """A run of one experiment: one point per mean (mapping m0, m1, ...), each with a 95%
    half-width of ci_share of its mean."""
    return {"images": images, "points": [
        {"mapping": f"m{i}", "op": "read", "map_cycles": {"mean": m, "ci95": m * ci_share}} for i, m in enumerate(means)]}


def test_run_effect_is_zero_for_runs_that_agree():
    means = [100.0 * (i + 1) for i in range(10)]
    sig = run_variance.estimate({"e": _run(means)}, {"e": _run(means)})
    assert sig[("e", "map_cycles")] == (0.0, 10, 0)
    assert run_variance.sigma([]) == 0.0


def test_run_effect_recovers_a_shift_between_runs():
    # Every point 1.3x slower in run 2, intervals of 1%: d = ln 1.3 = v + 2 sigma^2.
    means = [100.0 * (i + 1) for i in range(10)]
    (s, points, apart), = run_variance.estimate({"e": _run(means)}, {"e": _run([m * 1.3 for m in means])}).values()
    assert points == 10 and apart == 10
    v = 2 * (0.01 / estimator.t975(4)) ** 2
    assert abs(2 * s * s + v - math.log(1.3) ** 2) < 0.002, s


def test_run_effect_estimate_on_simulated_runs():
    # 300 points, sampling error 5% per run, a true run effect of 0.2 on the log scale.
    rng = random.Random(7)
    a, b = [], []
    for i in range(300):
        true = math.log(100.0 * (1 + i % 17))
        a.append(math.exp(true + rng.gauss(0, 0.2) + rng.gauss(0, 0.05)))
        b.append(math.exp(true + rng.gauss(0, 0.2) + rng.gauss(0, 0.05)))
    share = 0.05 * estimator.t975(4)  # a 95% half-width whose standard error is 5%
    (s, *_), = run_variance.estimate({"e": _run(a, share)}, {"e": _run(b, share)}).values()
    assert 0.16 < s < 0.24, s


def test_run_effect_turns_a_flip_into_inconclusive_in_both():
    # Point m0 against a fixed bound of 115: run 1 (100 ± 1) agrees that it lies below, run 2
    # (130 ± 1.3) differs; every point moved 1.3x between the runs.
    means = [100.0 * (i + 1) for i in range(10)]
    runs = {"e": _run(means)}, {"e": _run([m * 1.3 for m in means])}

    def below(run):
        (m, c), = [(f["map_cycles"]["mean"], f["map_cycles"]["ci95"]) for f in run["e"]["points"] if f["mapping"] == "m0"]
        return within((m, m - c, m + c), 0, 115)

    assert [below(r) for r in runs] == [AGREES, DIFFERS]
    sig = run_variance.estimate(*runs)
    for r in runs:
        run_variance.widen(r["e"], sig, "e")
    assert [below(r) for r in runs] == [INCONCLUSIVE, INCONCLUSIVE]
    kept = runs[0]["e"]["points"][0]["map_cycles"]
    assert kept["ci95_within_run"] == 1.0 and kept["ci95"] > 30



def test_trimmed_mean_and_yuen_interval():
    # 1..9 and an outlier: g = 2 dropped from each end, kept 3..8 (mean 5.5); winsorized
    # 3,3,3,4,5,6,7,8,8,8: squared deviations 42.5, s_w^2 = 42.5 / 9; Yuen's standard error
    # sqrt(9 s_w^2 / (6 * 5)) = sqrt(42.5 / 30); t(5) = 2.571.
    mean, ci, g = estimator.trimmed([1, 2, 3, 4, 5, 6, 7, 8, 9, 100])
    assert g == 2 and mean == 5.5
    assert abs(ci - 2.571 * math.sqrt(42.5 / 30)) < 1e-9
    # The outlier does not move it; the plain mean would go from 5.5 to 14.5.
    assert estimator.trimmed([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])[0] == 5.5
    # Below five values nothing is trimmed: the plain mean with Student's t.
    mean, ci, g = estimator.trimmed([1.0, 2.0, 3.0])
    assert g == 0 and mean == 2.0 and abs(ci - 4.303 * 1.0 / math.sqrt(3)) < 1e-9


def test_estimator_replaces_a_figure_and_keeps_the_plain_one():
    fig = {"mean": 14.5, "ci95": 20.0, "images": [{"mean": float(x)} for x in [1, 2, 3, 4, 5, 6, 7, 8, 9, 100]]}
    d = {"points": [{"mapping": "m", "map_cycles": fig}]}
    estimator.apply(d, "mean")
    assert fig["mean"] == 14.5, "--estimator mean leaves the JSON's figures"
    estimator.apply(d)
    assert fig["mean"] == 5.5 and fig["mean_plain"] == 14.5 and fig["ci95_plain"] == 20.0 and fig["df"] == 5
    # The run effect reads the standard error with the estimate's degrees of freedom.
    se = run_variance.log_se(fig, 10)
    assert abs(se - math.sqrt(42.5 / 30) / 5.5) < 1e-3


if __name__ == "__main__":
    n = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            n += 1
    print(f"bench/test_plot.py: {n} tests passed")
