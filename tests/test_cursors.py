"""commit / reset against the Python cursor model (replayssm_ext.cursor_rules), exactly, and the
Python model against the contract's words."""

import random

import pytest
import torch

from conftest import devices
from replayssm_ext import cursor_rules

I32, I8 = torch.int32, torch.int8


def _cursors(num_slots, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"hist": torch.randint(0, 50, (num_slots,), generator=g, dtype=I32).to(device),
            "start": torch.randint(0, 50, (num_slots,), generator=g, dtype=I32).to(device),
            "flush": torch.randint(0, 2, (num_slots,), generator=g, dtype=I8).to(device)}


def _as_model(cur):
    return [cursor_rules.Cursor(*c) for c in zip(*(cur[k].cpu().tolist() for k in ("hist", "start", "flush")))]


# --- the Python model against the contract's statement --------------------------------------

@pytest.mark.parametrize("Bcap,T", [(1, 1), (16, 1), (16, 4), (8, 8), (5, 2)])
def test_rules_match_contract_words(Bcap, T):
    R = Bcap + T + 1
    assert cursor_rules.reset_cursor(Bcap, T) == (0, 0, 0)
    for hist in range(0, Bcap + T + 1):
        for start in range(R):
            for flush in (0, 1):
                for a in range(1, T + 1):
                    got = cursor_rules.commit_cursor(cursor_rules.Cursor(hist, start, flush), a, Bcap, T, R)
                    if flush:
                        want_start, want_hist = (start + hist) % R, a
                    else:
                        want_start, want_hist = start, hist + a
                    assert got == (want_hist, want_start, int(want_hist + 2 * T > Bcap + T))


@pytest.mark.parametrize("Bcap,T", [(1, 1), (16, 1), (16, 4), (16, 8), (8, 8), (7, 3)])
def test_invariants_hold_on_any_acceptance_path(Bcap, T):
    """From reset, any acceptance sequence keeps: non-flush step => hist <= B - T; flush step =>
    hist <= B; so hist + n <= B + T and a window never overwrites unfolded history."""
    rng = random.Random(Bcap * 100 + T)
    R = Bcap + T
    for _ in range(200):
        c = cursor_rules.reset_cursor(Bcap, T)
        for _ in range(60):
            assert c.hist <= (Bcap if c.flush else Bcap - T), c
            assert 0 <= c.start < R
            c = cursor_rules.commit_cursor(c, rng.randint(1, T), Bcap, T, R)


def test_slot_is_live():
    assert cursor_rules.slot_is_live(0, None, 4)
    assert not cursor_rules.slot_is_live(-1, None, 4)
    assert not cursor_rules.slot_is_live(0, 0, 4)
    assert cursor_rules.slot_is_live(1, 0, 4)
    assert not cursor_rules.slot_is_live(4, None, 4)
    assert cursor_rules.ring_index(5, 4, 7) == 2


# --- the ops against the model ---------------------------------------------------------------

@pytest.mark.parametrize("device", devices("commit", "reset"))
@pytest.mark.parametrize("Bcap,T,extra", [(16, 1, 0), (16, 4, 0), (8, 2, 3), (8, 8, 0), (1, 1, 0)])
@pytest.mark.parametrize("null_slot", [None, 2])
def test_commit_reset_random_walk(device, Bcap, T, extra, null_slot):
    """Random batches of commits and resets (with padding ids, out-of-order slots, slots never
    touched) leave exactly the cursors the model predicts after every call."""
    rng = random.Random(hash((Bcap, T, extra, null_slot)) & 0xFFFF)
    num_slots, R = 9, Bcap + T + extra
    cur = _cursors(num_slots, device)
    model = _as_model(cur)
    live_ids = [s for s in range(num_slots) if s != null_slot]
    pads = [-1] + ([null_slot] if null_slot is not None else [])
    for step in range(150):
        batch = rng.randint(1, 6)
        ids = rng.sample(live_ids, batch)
        ids = [rng.choice(pads) if rng.random() < 0.2 else s for s in ids]
        if rng.random() < 0.15:
            torch.ops.replayssm.reset(torch.tensor(ids, dtype=I32, device=device), cur["hist"], cur["start"],
                                      cur["flush"], Bcap, T, null_slot)
            for s in ids:
                if cursor_rules.slot_is_live(s, null_slot, num_slots):
                    model[s] = cursor_rules.reset_cursor(Bcap, T)
        else:
            acc = [rng.randint(1, T) for _ in ids]
            torch.ops.replayssm.commit(torch.tensor(ids, dtype=I32, device=device), torch.tensor(acc, dtype=I32,
                                       device=device), cur["hist"], cur["start"], cur["flush"], Bcap, T, R, null_slot)
            for s, a in zip(ids, acc):
                if cursor_rules.slot_is_live(s, null_slot, num_slots):
                    model[s] = cursor_rules.commit_cursor(model[s], a, Bcap, T, R)
        assert _as_model(cur) == model, f"step {step}: ids {ids}"


@pytest.mark.parametrize("device", devices("commit"))
def test_commit_exact_cases(device):
    """Hand-computed cases of the contract's commit rule (B=16, T=4, R=23)."""
    Bcap, T, R = 16, 4, 23
    #          hist start flush accepted -> hist start flush
    cases = [(0, 0, 0, 4, 4, 0, 0),
             (8, 3, 0, 4, 12, 3, 0),   # 12 + 8 > 20? no (20 > 20 false)
             (9, 3, 0, 4, 13, 3, 1),   # 13 + 8 = 21 > 20
             (13, 20, 1, 2, 2, 10, 0),  # start = (20 + 13) % 23 = 10
             (16, 22, 1, 4, 4, 15, 0),  # (22 + 16) % 23 = 15
             (12, 0, 0, 1, 13, 0, 1)]
    cur = {"hist": torch.tensor([c[0] for c in cases], dtype=I32, device=device),
           "start": torch.tensor([c[1] for c in cases], dtype=I32, device=device),
           "flush": torch.tensor([c[2] for c in cases], dtype=I8, device=device)}
    torch.ops.replayssm.commit(torch.arange(len(cases), dtype=I32, device=device),
                               torch.tensor([c[3] for c in cases], dtype=I32, device=device),
                               cur["hist"], cur["start"], cur["flush"], Bcap, T, R, None)
    assert cur["hist"].tolist() == [c[4] for c in cases]
    assert cur["start"].tolist() == [c[5] for c in cases]
    assert cur["flush"].tolist() == [c[6] for c in cases]


@pytest.mark.parametrize("device", devices("reset"))
def test_reset_touches_only_listed_slots(device):
    cur = _cursors(6, device, seed=3)
    before = {k: v.clone() for k, v in cur.items()}
    torch.ops.replayssm.reset(torch.tensor([4, -1, 1, 0], dtype=I32, device=device), cur["hist"], cur["start"],
                              cur["flush"], 16, 4, 0)  # 0 is the null slot here: skipped
    for k in cur:
        for s in range(6):
            if s in (4, 1):
                assert cur[k][s].item() == 0
            else:
                assert cur[k][s].item() == before[k][s].item(), (k, s)


@pytest.mark.parametrize("device", devices("commit"))
def test_commit_empty_batch_is_a_no_op(device):
    cur = _cursors(4, device)
    before = {k: v.clone() for k, v in cur.items()}
    e = torch.empty(0, dtype=I32, device=device)
    torch.ops.replayssm.commit(e, e, cur["hist"], cur["start"], cur["flush"], 16, 4, 20, None)
    for k in cur:
        assert torch.equal(cur[k], before[k])


def test_cuda_cursors_match_cpu():
    """The same random walk on CPU and CUDA gives identical cursors (runs where both exist)."""
    from conftest import cuda_skip_reason
    reason = cuda_skip_reason(("commit", "reset"))
    if reason:
        pytest.skip(reason)
    rng = random.Random(7)
    Bcap, T, R = 16, 4, 21
    cpu, gpu = _cursors(32, "cpu"), _cursors(32, "cuda")
    for _ in range(100):
        ids = rng.sample(range(32), 24) + [-1]
        acc = [rng.randint(1, T) for _ in ids]
        for cur, dev in ((cpu, "cpu"), (gpu, "cuda")):
            torch.ops.replayssm.commit(torch.tensor(ids, dtype=I32, device=dev), torch.tensor(acc, dtype=I32,
                                       device=dev), cur["hist"], cur["start"], cur["flush"], Bcap, T, R, None)
        for k in cpu:
            assert torch.equal(cpu[k], gpu[k].cpu())
