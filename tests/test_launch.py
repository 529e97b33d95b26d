"""Launch specialisation keys keep apart what Triton compiles apart (no kernel runs here)."""
import torch

from seer.launch import specialisation


def test_ints_past_32_bits_get_their_own_key():
    # Triton passes such an int as a 64-bit parameter: a kernel compiled for 32 bits would wrap.
    assert specialisation(2**31 - 16) == specialisation(32)
    assert specialisation(2**31 - 16) != specialisation(2**31 + 16)
    assert specialisation(-(2**31)) != specialisation(-(2**31) - 16)


def test_ones_multiples_of_16_and_pointer_alignment_are_told_apart():
    assert len({specialisation(1), specialisation(16), specialisation(17)}) == 3
    base = torch.empty(8)
    assert specialisation(base) != specialisation(base[1:])
    assert specialisation(base) != specialisation(base.double())
