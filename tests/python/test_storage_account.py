"""The hook's storage accounting (trainscope._storage.StorageAccount) on its own: bytes by
collection, the projection over expected_steps from each collection's first save, the budget's
two warnings (each once) and the switch that stops raw tensors near the budget."""
import trainscope as ts
from trainscope._storage import GB, StorageAccount


def _account(budget, expected_steps=1000):
    warnings = []
    acc = StorageAccount(budget, expected_steps, lambda key, msg: warnings.append((key, msg)))
    return acc, warnings


def test_bytes_by_collection_and_projection_from_the_first_save():
    acc, warnings = _account(budget=0)  # no budget: counted, never warned
    colls = [ts.Collection("weights", save_interval=10), ts.Collection("gradients")]
    acc.add("weights", 100, step=0, collections=colls, save_interval=100)
    acc.add("weights", 50, step=0, collections=colls, save_interval=100)
    acc.add("weights", 999, step=10, collections=colls, save_interval=100)  # a later save
    acc.add("gradients", 0, step=0, collections=colls, save_interval=100)   # nothing written
    assert acc.bytes == 1149 and acc.by_collection == {"weights": 1149}
    assert acc.projected(colls, 100) == 0  # no budget: the first saves are not followed
    acc.per_save("gradients", 40)           # known at registration
    assert acc.projected(colls, 100) == 40 * (1000 // 100 + 1)
    assert warnings == [] and not acc.raw_disabled


def test_projection_past_the_budget_warns_once():
    acc, warnings = _account(budget=10_000, expected_steps=1000)
    colls = [ts.Collection("weights", save_interval=1)]
    acc.add("weights", 5, step=0, collections=colls, save_interval=1)  # 5 * 1001: under it
    assert warnings == []
    acc.add("weights", 95, step=0, collections=colls, save_interval=1)  # 100 * 1001: past it
    acc.add("weights", 100, step=0, collections=colls, save_interval=1)  # no longer followed
    acc.check_projection(colls, 1)
    assert [k for k, _ in warnings] == ["projection"]
    assert "past the budget" in warnings[0][1] and acc.projected(colls, 1) == 100 * 1001


def test_raw_tensors_stop_at_ninety_percent_of_the_budget():
    acc, warnings = _account(budget=1000, expected_steps=0)
    colls = [ts.Collection("tensors")]
    acc.add("tensors", 899, step=0, collections=colls, save_interval=1)
    assert not acc.raw_disabled
    acc.add("tensors", 1, step=1, collections=colls, save_interval=1)
    acc.add("tensors", 500, step=2, collections=colls, save_interval=1)
    assert acc.raw_disabled and [k for k, _ in warnings].count("budget") == 1


def test_hook_budget_attributes_are_the_accounts(tmp_path):
    hook = ts.Hook(str(tmp_path / "run"), system_monitor_interval_ms=0,
                   storage_budget_bytes=3 * GB, expected_steps=50)
    try:
        assert hook.storage_budget_bytes == 3 * GB and hook.expected_steps == 50
        hook.storage_budget_bytes = 2 * GB
        assert hook.storage_estimate() == {"bytes": 0, "by_collection": {},
                                           "projected_bytes": 0, "budget_bytes": 2 * GB}
        assert hook.config()["storage_budget_bytes"] == 2 * GB
    finally:
        hook.close()
