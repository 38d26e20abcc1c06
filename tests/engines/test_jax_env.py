"""planner.engines.jax_env: Ctrl-C is held back while JAX imports and starts, then delivered."""

from __future__ import annotations

import signal
import threading

import pytest

from planner.engines.jax_env import interrupts_held


def test_a_ctrl_c_inside_the_block_is_raised_when_it_ends():
    before = signal.getsignal(signal.SIGINT)
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)  # handled at once by the block's handler: nothing raised here
            reached.append("after the signal")
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is before


def test_the_handler_in_place_is_the_one_called():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)
            assert calls == []
        assert calls == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_it_is_a_plain_block():
    done = []

    def body():
        with interrupts_held():  # signal.signal would raise ValueError here
            done.append(True)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert done == [True]
