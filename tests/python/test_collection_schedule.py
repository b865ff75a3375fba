"""Collections translate to the core's save schedule (include/trainscope/schedule.h): the
Python hook and the C++ Session decide save steps with the same code, and "never" is one value."""
import pickle

import trainscope as ts
from trainscope import _core
from trainscope.collection import NEVER


def test_next_save_agrees_with_saves_at_for_every_kind_of_schedule():
    cases = [ts.Collection("gradients", save_interval=7, start_step=3, end_step=50),
             ts.Collection("weights", save_steps=[40, 2, 9, 9], modes=["eval", "train"]),
             ts.Collection("losses"), ts.Collection("custom", include="fc", modes=["predict"])]
    for c in cases:
        for mode in (ts.Mode.TRAIN, ts.Mode.EVAL, ts.Mode.PREDICT):
            saves = [s for s in range(70) if c.saves_at(mode, s, 10)]
            for s in range(60):
                later = [t for t in saves if t >= s]
                want = later[0] if later else NEVER
                got = c.next_save(mode, s, 10)
                assert got == want or (not later and got >= 70), (c, mode, s, got)


def test_never_is_the_cores_and_the_catalogue_is_the_cores():
    assert NEVER == _core.NEVER_SAVES == 1 << 62
    assert list(ts.BUILTIN_COLLECTIONS) == [n for n, _, _ in _core.builtin_collections()]
    assert ts.DEFAULT_COLLECTIONS == ("losses", "scalars", "weights", "gradients")
    assert "biases" in ts.BUILTIN_COLLECTIONS and "biases" not in ts.DEFAULT_COLLECTIONS
    assert ts.Collection("scalars").interval(100) == 1
    assert ts.Collection("weights").interval(100) == 100


def test_changing_a_schedule_attribute_reschedules_and_copies_keep_working():
    c = ts.Collection("gradients", save_interval=10)
    assert c.next_save(ts.Mode.TRAIN, 11) == 20
    c.save_interval = 4
    assert c.next_save(ts.Mode.TRAIN, 11) == 12
    c.end_step = 12
    assert c.next_save(ts.Mode.TRAIN, 11) == NEVER
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.next_save(ts.Mode.TRAIN, 5) == 8 and c2.saves_at(ts.Mode.TRAIN, 8)
