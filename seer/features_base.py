"""What a feature is: a name the trees use, and how a person reads its value."""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Feature:
    """A model input.

    ``label`` is the words a rule prints (``"row-length CV"``); ``unit`` follows the
    value when printed; ``integer`` marks a size, count or code, never negative: its thresholds
    print as whole numbers with separators, and a profile table with a negative one is refused.
    ``codes`` names a code feature's values by code (GEMM's dtype: 0 fp16, 1 bf16), so that a
    decision's features read ``dtype=bf16`` rather than ``dtype=1``.
    """

    name: str
    label: str
    unit: str = ""
    integer: bool = False
    codes: tuple[str, ...] = ()

    def format(self, value: float) -> str:
        if self.integer:
            text = f"{value:,.0f}"
        elif abs(value) >= 100:
            text = f"{value:,.1f}"
        else:
            text = f"{value:.3g}"
        return f"{text} {self.unit}".rstrip()

    def show(self, value) -> str:
        """A feature's value as a decision lists it: a code by its name, a float to 4 digits."""
        if self.codes and float(value).is_integer() and 0 <= value < len(self.codes):
            return self.codes[int(value)]
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    def format_bound(self, threshold: float) -> str:
        """A tree's threshold as rules print it (a sample goes left when ``value <= threshold``):
        exactly, so that every value reads on the side the tree sends it.

        Whole-number features print its floor: x <= 10240.5 and x <= 10240 say the same, and
        floor() keeps both "<=" and ">" exact (rounding 10241.5 to 10,242 would not). Others print
        the shortest decimal that reads back as the threshold (``repr``'s): training puts each
        threshold at the shortest decimal between the values it splits (:func:`seer.tree.readable_bound`),
        so it prints short; a model trained before that prints its midpoints at full length."""
        if self.integer:
            return self.format(math.floor(threshold))
        if not math.isfinite(threshold):
            return self.format(threshold)
        bound = Decimal(repr(threshold + 0.0))  # + 0.0: -0.0 reads 0
        text = f"{bound:,f}" if abs(threshold) >= 100 else f"{bound:f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return f"{text} {self.unit}".rstrip()


def reads_dtype(feature_names) -> bool:
    """Whether trees on these features see the dtype (GEMM's ``dtype``, the overlap ops' ``dtype_bytes``);
    where not, a model holds for the one dtype its campaign profiled (SpMV)."""
    return any(name.startswith("dtype") for name in feature_names)
