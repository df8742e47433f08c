"""Memory budget for weights and KV caches, and the Metal wired limit."""

import engine  # noqa: F401  (OpenBLAS before mlx)

# isort: split
import mlx.core as mx

from engine.memory.plan import GiB, WiredLimit, machine_memory_bytes, model_nbytes, plan_memory

MAC_16GB = {"max_recommended_working_set_size": int(10.7 * GiB), "device_name": "Apple M2"}


def test_metal_budget_is_the_working_set_minus_model_and_headroom():
    plan = plan_memory(4 * GiB, device_info=MAC_16GB)
    assert plan.metal and plan.fits and plan.warning is None
    assert plan.device_budget_bytes == MAC_16GB["max_recommended_working_set_size"]
    headroom = plan.device_budget_bytes // 10
    assert plan.kv_budget_bytes == min(
        plan.device_budget_bytes - headroom - 4 * GiB, plan.device_budget_bytes // 2
    )
    assert plan.wired_limit_bytes == 4 * GiB + plan.kv_budget_bytes
    assert plan.wired_limit_bytes <= plan.device_budget_bytes


def test_a_model_too_large_for_the_mac_is_reported_not_planned():
    plan = plan_memory(12 * GiB, device_info=MAC_16GB)
    assert plan.metal and not plan.fits and plan.kv_budget_bytes == 0
    assert "12.9 GB" in plan.warning and "smaller" in plan.warning
    assert plan.wired_limit_bytes == plan.device_budget_bytes


def test_a_user_budget_that_does_not_fit_is_lowered_with_a_warning():
    plan = plan_memory(4 * GiB, kv_budget_bytes=20 * GiB, device_info=MAC_16GB)
    assert plan.fits and plan.kv_budget_bytes < 20 * GiB
    assert "lowered" in plan.warning
    ok = plan_memory(4 * GiB, kv_budget_bytes=GiB, device_info=MAC_16GB)
    assert ok.kv_budget_bytes == GiB and ok.warning is None
    tight = plan_memory(int(9.5 * GiB), device_info=MAC_16GB)
    assert tight.fits and "prompt cache" in tight.warning


def test_off_metal_the_budget_comes_from_machine_memory_and_nothing_is_wired():
    plan = plan_memory(GiB, device_info={"device_name": "cpu"}, machine_bytes=16 * GiB)
    assert not plan.metal and plan.fits and plan.wired_limit_bytes is None
    assert plan.device_budget_bytes == 16 * GiB
    assert plan.kv_budget_bytes == min(16 * GiB - 4 * GiB - GiB, 8 * GiB)
    # On this machine (no Metal here) the real device info and memory are used.
    real = plan_memory(GiB)
    assert real.metal == mx.metal.is_available()
    assert real.device_budget_bytes > 0
    assert machine_memory_bytes() > GiB


def test_wired_limit_is_set_once_and_restored_on_metal():
    calls = []
    current = [7]

    def fake_set(limit: int) -> int:
        calls.append(limit)
        old, current[0] = current[0], limit
        return old

    plan = plan_memory(4 * GiB, device_info=MAC_16GB)
    wired = WiredLimit(fake_set, metal=True, synchronize=lambda: None)
    assert wired.apply(plan) and wired.active and wired.current == plan.wired_limit_bytes
    wired.apply(plan_memory(2 * GiB, device_info=MAC_16GB))  # a second model, same session
    wired.restore()
    assert current[0] == 7 and not wired.active  # back to the value from before the first apply
    wired.restore()  # a second restore changes nothing
    assert len(calls) == 3


def test_wired_limit_is_left_alone_off_metal():
    def must_not_run(limit: int) -> int:
        raise AssertionError("set_wired_limit called off Metal")

    plan = plan_memory(GiB, device_info={}, machine_bytes=16 * GiB)
    wired = WiredLimit(must_not_run, metal=False, synchronize=lambda: None)
    assert not wired.apply(plan) and not wired.active
    wired.restore()
    # The real object on this machine behaves the same way when there is no Metal.
    if not mx.metal.is_available():
        assert not WiredLimit().apply(plan_memory(GiB))


def test_model_bytes_count_the_parameters(tiny_model, tiny_model_dir):
    model, _ = tiny_model
    size = (tiny_model_dir / "model.safetensors").stat().st_size
    assert abs(model_nbytes(model) - size) < 0.01 * size
