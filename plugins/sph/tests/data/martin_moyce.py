"""Surge-front measurements for the collapse of a liquid column.

Reference
---------
J. C. Martin and W. J. Moyce, "Part IV. An experimental study of the collapse
of liquid columns on a rigid horizontal plane", Philosophical Transactions of
the Royal Society of London, Series A, 244 (882), 312-324 (1952).
doi:10.1098/rsta.1952.0006

Set-up and notation (Martin & Moyce)
------------------------------------
A two-dimensional column of water with base width ``a`` and height ``n**2 * a``
stands on a horizontal floor against a vertical wall at x = 0 and is released
at t = 0.  ``z`` is the distance of the leading edge of the surge (the front,
at the floor) from that wall, so the initial state is Z = 1 at T = 0.

Columns of each entry: ``(T, Z)``

* ``Z = z / a``                     -- front distance from the wall over the
  initial column width.
* ``T = n * t * sqrt(g / a)``       -- the paper's dimensionless time for the
  front.  Because it carries the factor ``n``, its meaning depends on the
  column:

  - ``N2_2`` (n**2 = 2, column height 2a, width a):  T = t * sqrt(2 g / a)
  - ``N2_1`` (n**2 = 1, square column a x a):         T = t * sqrt(g / a)

  To put ``N2_1`` on the t*sqrt(2 g / a) scale multiply its T by sqrt(2); to
  put ``N2_2`` on the t*sqrt(g / a) scale divide its T by sqrt(2).

Data
----
``N2_2``: n**2 = 2, a = 2.25 in (57.15 mm); front positions of the paper's
Table 2.  Z is listed at 1/4-inch intervals of travel (steps of 1/9 in Z).

``N2_1``: n**2 = 1, a = 2.25 in; the square-column front, Z again in steps
of 1/9.  The last three points (T >= 3.21) show an abrupt acceleration of the
front and are best left out of tight comparisons.

All values carry two decimals; compare with a tolerance of a few per cent
rather than exactly.
"""

#: Inches; the initial column width ``a`` of both data sets.
A_INCHES = 2.25

#: n**2 = 2 (height 2a, width a).  (T, Z) with T = t*sqrt(2 g / a), Z = z / a.
N2_2 = [
    (0.41, 1.11),
    (0.84, 1.22),
    (1.19, 1.44),
    (1.43, 1.67),
    (1.63, 1.89),
    (1.83, 2.11),
    (1.98, 2.33),
    (2.20, 2.56),
    (2.32, 2.78),
    (2.51, 3.00),
    (2.65, 3.22),
    (2.83, 3.44),
    (2.98, 3.67),
    (3.11, 3.89),
    (3.33, 4.11),
]

#: n**2 = 1 (square column).  (T, Z) with T = t*sqrt(g / a), Z = z / a.
N2_1 = [
    (0.43, 1.11),
    (0.62, 1.22),
    (0.80, 1.44),
    (0.97, 1.67),
    (1.14, 1.89),
    (1.29, 2.11),
    (1.45, 2.33),
    (1.62, 2.56),
    (1.76, 2.78),
    (1.93, 3.00),
    (2.07, 3.22),
    (2.24, 3.44),
    (2.40, 3.67),
    (2.54, 3.89),
    (2.71, 4.11),
    (2.87, 4.33),
    (3.04, 4.56),
    (3.21, 4.78),
    (3.29, 4.89),
    (3.32, 5.00),
]
