"""The Beta distribution LowRiskOverCommitment fits to a node's measured load.

Moment matching (mean m1, second moment m2) gives alpha and beta; the distribution function is the
regularized incomplete beta function I_x(alpha, beta). Upstream evaluates it with gonum's `RegIncBeta`,
a port of the Cephes `incbet` routine: a power series where it converges fast, otherwise one of two
continued fractions (at most 300 terms), with the arguments swapped above the mean. The same scheme is
used here so that results agree with upstream to the last few bits, including where the continued
fraction is cut short for very concentrated distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

MACHEP = 1.11022302462515654042e-16
MAXLOG = 7.09782712893383996843e2
MINLOG = -7.08396418532264106224e2
MAXGAM = 171.624376956302725
BIG = 4.503599627370496e15
BIGINV = 2.22044604925031308085e-16
SMALLEST_NONZERO = 5e-324  # math.SmallestNonzeroFloat64

# LowRiskOverCommitment's allowance below the largest variance a Beta distribution can have.
MAX_VARIANCE_ALLOWANCE = 0.99


def _gamma_ratio(a: float, b: float) -> float:
    """Gamma(a+b) / (Gamma(a) Gamma(b)) for arguments small enough."""
    return math.gamma(a + b) / (math.gamma(a) * math.gamma(b))


def _pseries(a: float, b: float, x: float) -> float:
    """Power series for I_x(a, b), good when b·x <= 1 and x <= 0.95."""
    ai = 1.0 / a
    u = (1.0 - b) * x
    v = u / (a + 1.0)
    t1 = v
    t = u
    n = 2.0
    s = 0.0
    z = MACHEP * ai
    while abs(v) > z:
        u = (n - b) * x / n
        t *= u
        v = t / (a + n)
        s += v
        n += 1.0
    s += t1
    s += ai
    u = a * math.log(x)
    if a + b < MAXGAM and abs(u) < MAXLOG:
        return s * _gamma_ratio(a, b) * math.pow(x, a)
    t = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + u + math.log(s)
    return 0.0 if t < MINLOG else math.exp(t)


def _continued_fraction(a: float, b: float, x: float, second: bool) -> float:
    """Cephes' two continued-fraction expansions (incbcf, and incbd when `second`), 300 terms at most."""
    if second:
        k1, k2, k3, k4, k5, k6, k7, k8 = a, b - 1.0, a, a + 1.0, 1.0, a + b, a + 1.0, a + 2.0
        z = x / (1.0 - x)
    else:
        k1, k2, k3, k4, k5, k6, k7, k8 = a, a + b, a, a + 1.0, 1.0, b - 1.0, a + 1.0, a + 2.0
        z = x
    pkm2, qkm2, pkm1, qkm1 = 0.0, 1.0, 1.0, 1.0
    ans, r = 1.0, 1.0
    thresh = 3.0 * MACHEP
    for _ in range(300):
        xk = -(z * k1 * k2) / (k3 * k4)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        xk = (z * k5 * k6) / (k7 * k8)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        if qk != 0:
            r = pk / qk
        if r != 0:
            t = abs((ans - r) / r)
            ans = r
        else:
            t = 1.0
        if t < thresh:
            break
        k1 += 1.0
        k3 += 2.0
        k4 += 2.0
        k5 += 1.0
        k7 += 2.0
        k8 += 2.0
        if second:
            k2 -= 1.0
            k6 += 1.0
        else:
            k2 += 1.0
            k6 -= 1.0
        if abs(qk) + abs(pk) > BIG:
            pkm2, pkm1, qkm2, qkm1 = pkm2 * BIGINV, pkm1 * BIGINV, qkm2 * BIGINV, qkm1 * BIGINV
        if abs(qk) < BIGINV or abs(pk) < BIGINV:
            pkm2, pkm1, qkm2, qkm1 = pkm2 * BIG, pkm1 * BIG, qkm2 * BIG, qkm1 * BIG
    return ans


@lru_cache(maxsize=65536)
def reg_inc_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and x in [0, 1] (NaN outside the domain)."""
    if a <= 0 or b <= 0 or x < 0 or x > 1 or not (math.isfinite(a) and math.isfinite(b) and math.isfinite(x)):
        return math.nan
    if x == 0:
        return 0.0
    if x == 1:
        return 1.0
    if b * x <= 1.0 and x <= 0.95:
        return _pseries(a, b, x)
    w = 1.0 - x
    flag = False
    if x > a / (a + b):
        flag = True
        a, b = b, a
        xc = x
        x = w
    else:
        xc = w
    if flag and b * x <= 1.0 and x <= 0.95:
        t = _pseries(a, b, x)
        return 1.0 - MACHEP if t <= MACHEP else 1.0 - t
    y = x * (a + b - 2.0) - (a - 1.0)
    w = _continued_fraction(a, b, x, second=False) if y < 0.0 else _continued_fraction(a, b, x, second=True) / xc
    y = a * math.log(x)
    t = b * math.log(xc)
    if a + b < MAXGAM and abs(y) < MAXLOG and abs(t) < MAXLOG:
        t = math.pow(xc, b) * math.pow(x, a) / a * w * _gamma_ratio(a, b)
    else:
        y += t + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        y += math.log(w / a) if w > 0 else -math.inf
        t = 0.0 if y < MINLOG else math.exp(y)
    if flag:
        t = 1.0 - MACHEP if t <= MACHEP else 1.0 - t
    return t


@dataclass(frozen=True, slots=True)
class BetaDistribution:
    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def variance(self) -> float:
        m1 = self.mean
        m2 = m1 * (self.alpha + 1) / (self.alpha + self.beta + 1)
        return m2 - m1 * m1

    def cdf(self, x: float) -> float:
        """DistributionFunction: P(X <= x); 0 where the value is not a probability."""
        p = reg_inc_beta(self.alpha, self.beta, x)
        if math.isnan(p) or p < 0 or p > 1:
            return 0.0
        return p


def match_moments(m1: float, m2: float) -> BetaDistribution | None:
    """MatchMoments: the Beta distribution with mean m1 and second moment m2, or None when none exists."""
    variance = m2 - m1 * m1
    if m1 < 0 or m1 > 1 or variance < 0 or variance >= m1 * (1 - m1):
        return None
    # Go divides by a zero variance without complaint: +Inf, and the fitted distribution is degenerate.
    temp = (m1 * (1 - m1) / variance if variance != 0 else math.inf) - 1
    temp = max(temp, SMALLEST_NONZERO)
    return BetaDistribution(m1 * temp, (1 - m1) * temp)


def max_variance(m1: float) -> float:
    """GetMaxVariance: m1 (1 - m1) inside (0, 1), else 0."""
    if 0 < m1 < 1:
        return m1 * (1 - m1)
    return 0.0


def compute_probability(mu: float, sigma: float, threshold: float) -> tuple[float, BetaDistribution | None]:
    """ComputeProbability: P(utilisation <= threshold) under the fitted Beta distribution."""
    if mu == 0 or (sigma == 0 and mu <= threshold):
        return 1.0, None
    if sigma == 0 and mu > threshold:
        return 0.0, None
    dist = match_moments(mu, sigma * sigma + mu * mu)
    if dist is None:
        return 0.0, None
    below = dist.cdf(threshold)
    if math.isnan(below):
        return 1.0, dist
    return below, dist
