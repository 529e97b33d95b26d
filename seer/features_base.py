"""What a feature is: a name the trees use, and how a person reads its value."""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

# A printed bound is within this share of the tree's threshold (see Feature.format_bound).
BOUND_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Feature:
    """A model input.

    ``label`` is the words a rule prints (``"row-length CV"``); ``unit`` follows the
    value when printed; ``integer`` marks a size, count or code, never negative: its thresholds
    print as whole numbers with separators, and a profile table with a negative one is refused.
    """

    name: str
    label: str
    unit: str = ""
    integer: bool = False

    def format(self, value: float) -> str:
        if self.integer:
            text = f"{value:,.0f}"
        elif abs(value) >= 100:
            text = f"{value:,.1f}"
        else:
            text = f"{value:.3g}"
        return f"{text} {self.unit}".rstrip()

    def format_bound(self, threshold: float) -> str:
        """A tree's threshold as rules print it (a sample goes left when ``value <= threshold``).

        Whole-number features print its floor: x <= 10240.5 and x <= 10240 say the same, and
        floor() keeps both "<=" and ">" exact (rounding 10241.5 to 10,242 would not). Others print
        it rounded down to the fewest digits, from the value format's, within ``BOUND_TOLERANCE``
        of it: rounded down, a value above the bound always reads so, and a round value just past
        a threshold (a mean row of exactly 25 against 24.9974) is not printed as on its other side,
        as 3 digits rounded to nearest did ("<= 25"). Values in the sliver between the printed
        bound and the threshold still read wrongly; the Python export and the model keep the
        threshold exactly."""
        if self.integer:
            return self.format(math.floor(threshold))
        if not math.isfinite(threshold) or threshold == 0:
            return self.format(threshold)
        exact, shortest = Decimal(threshold), Decimal(repr(threshold))  # repr: the shortest that reads back
        magnitude = math.floor(math.log10(abs(threshold)))
        digits = max(3, magnitude + 2)  # the value format's: 3 significant, or 1 decimal from 100 up
        while True:
            if len(shortest.as_tuple().digits) <= digits:
                bound = shortest  # the threshold itself
                break
            bound = exact.quantize(Decimal(10) ** (magnitude + 1 - digits), rounding=ROUND_FLOOR)
            if digits >= 17 or exact - bound <= Decimal(BOUND_TOLERANCE * abs(threshold)):
                break
            digits += 1
        text = f"{bound:,f}" if abs(threshold) >= 100 else f"{bound:f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return f"{text} {self.unit}".rstrip()


def reads_dtype(feature_names) -> bool:
    """Whether trees on these features see the dtype (GEMM's ``dtype``, the overlap ops' ``dtype_bytes``);
    where not, a model holds for the one dtype its campaign profiled (SpMV)."""
    return any(name.startswith("dtype") for name in feature_names)
