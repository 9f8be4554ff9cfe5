"""The ReplaySSM cursor rules on plain Python ints, for the reference implementation only.

This mirrors ``csrc/include/replayssm/common/cursor.h``, which is the definition: the CPU and CUDA
``commit`` / ``reset`` ops and every kernel use the C++ version, and the tests check that the two
agree exactly. docs/contract.md states the rules in words.
"""

from typing import NamedTuple, Optional

PAD_SLOT = -1
"""Slot id that always means "no sequence in this row"."""


class Cursor(NamedTuple):
    """One slot's cursor: ``hist`` unfolded committed entries, ``start`` the physical index of
    logical entry 0, ``flush`` 1 when the next step folds the history first."""

    hist: int
    start: int
    flush: int


def slot_is_live(slot: int, null_slot: Optional[int], num_slots: int) -> bool:
    """True when a row with this slot id reads and writes the cache.

    Padding (``-1`` or ``null_slot``) and out-of-range ids are not live. ``null_slot=None`` means
    there is no second padding id (the C++ side passes -1 for it, which is the same thing).
    """
    null = PAD_SLOT if null_slot is None else null_slot
    return slot >= 0 and slot != null and slot < num_slots


def ring_index(start: int, logical: int, ring_len: int) -> int:
    """Physical ring position of logical entry ``logical`` (0 = oldest unfolded entry)."""
    return (start + logical) % ring_len


def flush_due(hist: int, hist_capacity: int, max_tokens: int) -> int:
    """The early-flush rule: 1 when a further full window could not follow ``hist`` entries
    without passing the history capacity, i.e. ``hist + 2T > B + T``."""
    return int(hist + 2 * max_tokens > hist_capacity + max_tokens)


def commit_cursor(cursor: Cursor, accepted: int, hist_capacity: int, max_tokens: int,
                  ring_len: int) -> Cursor:
    """The cursor after a step on its slot accepted ``accepted`` tokens (``1 <= accepted <= T``).

    A flush step already folded ``hist`` entries into the checkpoint, so the window it wrote (at
    logical ``hist..``) becomes logical ``0..`` by moving ``start``.
    """
    hist, start, flush = cursor
    if flush:
        start = ring_index(start, hist, ring_len)
        hist = accepted
    else:
        hist = hist + accepted
    return Cursor(hist, start, flush_due(hist, hist_capacity, max_tokens))


def reset_cursor(hist_capacity: int, max_tokens: int) -> Cursor:
    """The cursor after prefill (or a fold on demand) wrote the checkpoint: an empty history."""
    return Cursor(0, 0, flush_due(0, hist_capacity, max_tokens))
