#!/usr/bin/env python3
"""Tests of bench/plot.py's verdict rules (R1, R2; bench/results-intro.md). Run by
scripts/test.sh: python3 bench/test_plot.py"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402
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


if __name__ == "__main__":
    n = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            n += 1
    print(f"bench/test_plot.py: {n} tests passed")
