"""Variation between two full runs of the paper benchmark, and the intervals that include it.

A point's interval within one run covers the spread between its images (and the trials on
each). Two runs on one machine differ by more than that: a run's points shift together with
the state of the host for the hour it takes (measured: the extent tree's cold reads 1.5x
apart between two runs at one commit, on one kernel, whose five-image intervals did not
overlap). So a verdict from one run's intervals alone can flip in the next run.

The model (a random-effects model, as in a meta-analysis): a point's log mean in a run is its
true log value, plus a run effect with variance sigma^2 shared by every point of an
experiment's metric, plus the run's own sampling error (its interval). For two runs,
d = ln m1 - ln m2 has variance v + 2 sigma^2, v being the two runs' squared standard errors
(of the log means). sigma is the maximum-likelihood value over every point of the metric
measured in both runs (a one-dimensional search). Each point's 95% half-width then becomes,
on the log scale, sqrt((ci/m)^2 + (1.96 sigma)^2), in both runs alike; the verdict rules
(bench/plot.py, R1 and R2) are unchanged and read the widened intervals.
"""

import math

import estimator

Z975 = 1.96
# The search range of sigma (log scale): 0, and 1e-4 to 3 (a factor of 20 per run).
GRID = [0.0] + [math.exp(math.log(1e-4) + i * (math.log(3.0) - math.log(1e-4)) / 600) for i in range(601)]


def figures(point):
    """The metrics of a point measured over several images: name -> {mean, ci95, images}."""
    return {k: v for k, v in point.items() if isinstance(v, dict) and "mean" in v and "ci95" in v}


def label(point):
    """What names a point across runs: its scalar fields but the image count."""
    return tuple(sorted((k, str(v)) for k, v in point.items() if k != "images" and not isinstance(v, (dict, list))))


def log_se(fig, n):
    """Standard error of the log mean of a figure over n images (its 95% half-width over
    Student's t with the estimate's degrees of freedom, n - 1 for a plain mean, and over the
    mean), or None when it has no interval between images."""
    m, c = fig.get("mean"), fig.get("ci95")
    if n < 2 or m is None or c is None or not m > 0 or math.isnan(c):
        return None
    return c / estimator.t975(fig.get("df", n - 1)) / m


def pairs(d1, d2):
    """metric -> [(d, v)] over every point of the experiment measured in both runs with a
    positive mean and an interval between images in both."""
    n1, n2 = d1.get("images") or 1, d2.get("images") or 1
    second = {label(p): p for p in d2["points"] if "error" not in p}
    out = {}
    for p in d1["points"]:
        q = second.get(label(p))
        if "error" in p or q is None:
            continue
        f2 = figures(q)
        for name, a in figures(p).items():
            b = f2.get(name)
            if b is None:
                continue
            sa, sb = log_se(a, n1), log_se(b, n2)
            if sa is None or sb is None or not b["mean"] > 0:
                continue
            out.setdefault(name, []).append((math.log(a["mean"]) - math.log(b["mean"]), sa * sa + sb * sb))
    return out


def sigma(diffs):
    """The maximum-likelihood run effect sigma (log scale) of d_i ~ N(0, v_i + 2 sigma^2)."""
    if not diffs:
        return 0.0

    def loglik(s):
        total = 0.0
        for d, v in diffs:
            var = max(v + 2 * s * s, 1e-18)
            total -= 0.5 * (math.log(var) + d * d / var)
        return total

    return max(GRID, key=loglik)


def estimate(data, data2):
    """Per experiment and metric: (sigma, points, points whose two runs' intervals alone
    say they differ at 95%)."""
    out = {}
    for key in sorted(set(data) & set(data2)):
        for name, diffs in pairs(data[key], data2[key]).items():
            apart = sum(1 for d, v in diffs if abs(d) > Z975 * math.sqrt(v))
            out[(key, name)] = (sigma(diffs), len(diffs), apart)
    return out


def widen(d, sigmas, key):
    """Adds the run effect of each of the experiment's metrics to every point's 95% interval
    (in place); the interval within the run is kept as `ci95_within_run`."""
    for p in d["points"]:
        for name, fig in figures(p).items():
            s = sigmas.get((key, name), (0.0,))[0]
            m, c = fig.get("mean"), fig.get("ci95")
            if m is None or c is None or not m > 0 or math.isnan(c):
                continue
            fig["ci95_within_run"] = c
            fig["ci95"] = m * math.sqrt((c / m) ** 2 + (Z975 * s) ** 2)


def section(sigmas, unstable_without):
    """The page's account of the run effect: a table of the factors added, and how many
    checks would have differed between the runs without them."""
    rows = [
        f"| {key} | {name} | {points} | {apart} | {math.exp(Z975 * s):.2f}x |"
        for (key, name), (s, points, apart) in sorted(sigmas.items())
    ]
    return (
        """
## Variation between the runs

A point's interval within one run covers its images; the runs' points also move together
with the host's state over the hour each run takes. Every interval on this page therefore
includes a **run effect**, estimated from the two runs by maximum likelihood per experiment
and metric (`bench/run_variance.py`: the log mean of a point in a run = its true value + a
run effect of variance σ² shared by the metric's points + the run's sampling error). Each
point's 95% half-width on the log scale is sqrt((ci/mean)² + (1.96 σ)²), in both runs; the
rules above are applied to these intervals. Without the run effect, """
        + f"{unstable_without} check{'s' if unstable_without != 1 else ''} would have given different verdicts in the two runs."
        + """ Below: the points measured in both runs, those whose two runs lie apart by their
within-run intervals alone, and the 95% factor the run effect adds to each point (exp(1.96 σ)).

| experiment | metric | points | apart within-run | run factor |
|---|---|---:|---:|---:|
"""
        + "\n".join(rows)
        + "\n"
    )
