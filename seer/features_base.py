"""What a feature is: a name the trees use, and how a person reads its value."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feature:
    """A model input.

    ``label`` is the words a rule prints (``"row-length CV"``); ``unit`` follows the
    value when printed; ``integer`` prints thresholds as whole numbers with separators.
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
