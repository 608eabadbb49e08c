"""The estimate of a point measured on several images: a 20% trimmed mean of the images'
means with Yuen's 95% interval.

Why not the plain mean: the images of one point differ in placement, and now and then one
image lands badly in physical memory (in run 1 of utilization at 95% full, one of ten images
measured cuckoo's cold random reads at 2,139 cycles, the other nine at 696 to 861). One such
image moves a mean over ten by 15% and widens its interval threefold, so a check near its
bound turned decisive in one run and inconclusive in the other through one image. The
trimmed mean drops the g = floor(0.2 n) smallest and largest image means (g = 0 below five
images: then it is the plain mean with Student's t interval), and Yuen's interval takes its
standard error from the winsorized variance (Wilcox, "Introduction to Robust Estimation and
Hypothesis Testing", §4.4.1), with n - 2g - 1 degrees of freedom.

The rule was chosen before the runs it is judged by (bench/results-intro.md, "The
estimator"); `--estimator mean` in bench/plot.py gives the plain mean, for comparison.
"""

import math

TRIM = 0.2
# Student's t, 97.5% quantile, by degrees of freedom (1 to 30); above 30, 1.96 + 2.4/df.
T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip


def t975(df):
    if df < 1:
        return math.nan
    return T975[df - 1] if df <= len(T975) else 1.96 + 2.4 / df


def trimmed(xs, trim=TRIM):
    """(trimmed mean, 95% half-width, images trimmed from each end) of the values xs."""
    xs = sorted(x for x in xs if x is not None and not math.isnan(x))
    n = len(xs)
    if n == 0:
        return (math.nan, math.nan, 0)
    g = int(math.floor(trim * n))
    h = n - 2 * g
    mean = sum(xs[g : n - g]) / h
    if h < 2:
        return (mean, math.nan, g)
    w = [xs[g]] * g + xs[g : n - g] + [xs[n - g - 1]] * g
    wm = sum(w) / n
    sw2 = sum((x - wm) ** 2 for x in w) / (n - 1)
    se = math.sqrt((n - 1) * sw2 / (h * (h - 1)))
    return (mean, t975(h - 1) * se, g)


def apply(d, estimator="trimmed"):
    """Replaces, in place, the mean and ci95 of every figure of experiment `d` measured on
    two images or more by the estimator's (the plain ones kept as mean_plain, ci95_plain)."""
    if estimator == "mean":
        return
    for p in d.get("points", []):
        for fig in p.values():
            if not isinstance(fig, dict) or not isinstance(fig.get("images"), list):
                continue
            means = [i.get("mean") for i in fig["images"] if isinstance(i, dict)]
            means = [x for x in means if x is not None]
            if len(means) < 2:
                continue
            mean, ci, g = trimmed(means)
            fig["mean_plain"], fig["ci95_plain"] = fig.get("mean"), fig.get("ci95")
            fig["mean"], fig["ci95"], fig["trimmed_each_end"] = mean, ci, g
            fig["df"] = len(means) - 2 * g - 1
