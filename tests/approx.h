// approx(v): doctest::Approx with a purely relative tolerance, what every test compares with.
// doctest's own Approx(v).epsilon(e) accepts |x - v| < e x (scale + max(|x|, |v|)) with a default
// scale of 1: an absolute slack of e (1.2e-5 by default) that lets any two times of microseconds,
// or any two fractions within e of each other, compare equal. With scale 0 the slack is e x
// max(|x|, |v|) only (and a comparison with 0 is exact).
#pragma once

#include <doctest/doctest.h>

inline doctest::Approx approx(double value) { return doctest::Approx(value).scale(0); }
